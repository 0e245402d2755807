//! What the controller shard does with topic changes: CreateTopics,
//! CreatePartitions, AlterConfigs and DeleteTopics are checked, persisted
//! and published to every shard; a change whose partitions do not all open
//! is undone.

use std::{rc::Rc, sync::Arc};

use crate::protocol::errors;
use crate::shard::{
    messages::{ApplyTopics, OpenFailure},
    messages::{ConfigChange, NewPartitions, NewTopic, TopicOutcome},
    router,
    topic_errors::Refusal,
    topics::{self, TopicMeta, TopicTable},
    Shard,
};

/// Most partitions one CreateTopics may ask for in a topic. Each partition is
/// a directory and open files; this keeps one request from exhausting them.
const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

impl Shard {
    /// The shape every topic change shares: under the controller permit,
    /// each item is checked (and, unless `validate_only`, applied) against
    /// one copy of the table by `one`, which says whether it changed it;
    /// then the table is persisted and published once.
    async fn change_topics<T>(
        self: &Rc<Self>,
        items: Vec<T>,
        mut one: impl FnMut(&mut TopicTable, T) -> (TopicOutcome, bool),
    ) -> Vec<TopicOutcome> {
        debug_assert_eq!(self.id, router::CONTROLLER);
        let _permit = self.controller_permit.acquire_permit(1).await.expect("controller permit: never closed");
        let mut table = (*self.topics()).clone();
        let mut outcomes = Vec::with_capacity(items.len());
        let mut changed = false;
        for item in items {
            let (outcome, changed_table) = one(&mut table, item);
            changed |= changed_table;
            outcomes.push(outcome);
        }
        if changed {
            self.publish_or_fail(table, &mut outcomes).await;
        }
        outcomes
    }

    /// Controller only: validates, persists and announces new topics.
    pub(super) async fn create_topics(
        self: &Rc<Self>,
        requested: Vec<NewTopic>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        if let Some(link) = &self.settings.cluster {
            return self.create_cluster_topics(link, requested, validate_only).await;
        }
        let this = self.clone();
        self.change_topics(requested, |table, t| this.create_one(table, t, validate_only)).await
    }

    fn create_one(&self, table: &mut TopicTable, mut t: NewTopic, validate_only: bool) -> (TopicOutcome, bool) {
        let partitions = if t.partitions == -1 { self.settings.default_partitions } else { t.partitions };
        let mut outcome = outcome_for(&t.name, partitions);
        let configs: std::collections::BTreeMap<String, String> = std::mem::take(&mut t.configs).into_iter().collect();
        let check = self.check_new_topic(table, &t, partitions, &configs);
        let Some(()) = settle(&mut outcome, check, validate_only) else { return (outcome, false) };
        let meta = TopicMeta {
            id: topics::new_topic_id(),
            shards: router::assign(&t.name, partitions, self.count),
            configs,
            internal: false,
            leaders: Vec::new(),
            replicas: Default::default(),
        };
        outcome.id = meta.id_bytes();
        table.topics.insert(t.name.as_str().into(), meta);
        (outcome, true)
    }

    pub(super) fn check_new_topic(
        &self,
        table: &TopicTable,
        t: &NewTopic,
        partitions: i32,
        configs: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), Refusal> {
        topics::validate_topic_name(&t.name)?;
        if table.topics.contains_key(t.name.as_str()) {
            return Err(Refusal::new(errors::TOPIC_ALREADY_EXISTS, format!("topic {} already exists", t.name)));
        }
        if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
            return Err(Refusal::new(
                errors::INVALID_PARTITIONS,
                format!("partitions must be 1..={PARTITIONS_PER_TOPIC_MAX}, got {partitions}"),
            ));
        }
        self.room_for(table, partitions)?;
        // In a quorum the leader checks the factor against the live
        // brokers; alone there is one copy.
        let clustered = table.node_id.is_some();
        if !(t.replication_factor == -1 || t.replication_factor == 1 || clustered && t.replication_factor > 1) {
            return Err(Refusal::new(
                errors::INVALID_REPLICATION_FACTOR,
                format!(
                    "topic {}: replication factor {}: a broker alone keeps one copy, so it must be 1",
                    t.name, t.replication_factor
                ),
            ));
        }
        topics::log_config(configs)?;
        Ok(())
    }

    /// Whether `more` partitions fit beside those in `table` within the
    /// broker's memory budget (POLICY_VIOLATION if not).
    pub(super) fn room_for(&self, table: &TopicTable, more: i32) -> Result<(), Refusal> {
        let (have, max) = (table.partition_count(), self.settings.max_partitions);
        if have + more.max(0) as u64 <= max {
            return Ok(());
        }
        Err(Refusal::new(
            errors::POLICY_VIOLATION,
            format!(
                "{more} more partitions would make {} on this broker, and its memory budget leaves room for {max} \
                 ({} of state each); raise --memory and restart the broker",
                have + more.max(0) as u64,
                crate::server::memory::show(crate::server::memory::PARTITION_STATE_BYTES)
            ),
        ))
    }

    /// Controller only: grows topics to more partitions. Existing partitions
    /// keep their shards; the new ones are placed as if the topic had been
    /// created with the new count.
    pub(super) async fn create_partitions(
        self: &Rc<Self>,
        requested: Vec<NewPartitions>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        if let Some(link) = &self.settings.cluster {
            return self.grow_cluster_topics(link, requested, validate_only).await;
        }
        let this = self.clone();
        self.change_topics(requested, |table, t| {
            let mut outcome = outcome_for(&t.name, t.count);
            let grows_by = table.topics.get(t.name.as_str()).map_or(0, |m| t.count - m.partitions());
            let check = check_new_partitions(table, &t).and_then(|()| this.room_for(table, grows_by));
            let Some(()) = settle(&mut outcome, check, validate_only) else { return (outcome, false) };
            let meta = table.topics.get_mut(t.name.as_str()).expect("checked: the topic exists");
            let placed = router::assign(&t.name, t.count, this.count);
            let have = meta.shards.len();
            meta.shards.extend_from_slice(&placed[have..]);
            outcome.id = meta.id_bytes();
            (outcome, true)
        })
        .await
    }

    /// Controller only: checks, persists and publishes topic config changes;
    /// the owners reopen the changed topics' partitions with their new
    /// settings (`apply_topics`).
    pub(super) async fn alter_configs(
        self: &Rc<Self>,
        changes: Vec<ConfigChange>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        if let Some(link) = &self.settings.cluster {
            return self.configure_cluster_topics(link, changes, validate_only).await;
        }
        self.change_topics(changes, |table, change| {
            let mut outcome = outcome_for(&change.topic, 0);
            let Some(configs) = settle(&mut outcome, changed_configs(table, &change), validate_only) else {
                return (outcome, false);
            };
            let meta = table.topics.get_mut(change.topic.as_str()).expect("checked: the topic exists");
            let changed = meta.configs != configs;
            meta.configs = configs;
            (outcome, changed)
        })
        .await
    }

    /// Controller only: removes topics, then their partitions' files.
    pub(super) async fn delete_topics(self: &Rc<Self>, names: Vec<String>) -> Vec<TopicOutcome> {
        if let Some(link) = &self.settings.cluster {
            return self.delete_cluster_topics(link, names).await;
        }
        let _permit = self.controller_permit.acquire_permit(1).await.expect("controller permit: never closed");
        let mut table = (*self.topics()).clone();
        let mut outcomes = Vec::new();
        for name in names {
            let mut o =
                TopicOutcome { name: name.clone(), error: errors::NONE, message: None, id: [0; 16], partitions: 0 };
            if table.topics.get(name.as_str()).is_some_and(|m| m.internal) {
                o.error = errors::INVALID_TOPIC_EXCEPTION;
                o.message = Some(format!("{name} is an internal topic and cannot be deleted"));
                outcomes.push(o);
                continue;
            }
            match table.topics.remove(name.as_str()) {
                Some(meta) => {
                    o.id = meta.id_bytes();
                    o.partitions = meta.partitions();
                }
                None => {
                    o.error = errors::UNKNOWN_TOPIC_OR_PARTITION;
                    o.message = Some(format!("topic {name} does not exist"));
                }
            }
            outcomes.push(o);
        }
        if outcomes.iter().any(|o| o.error == errors::NONE) {
            self.publish_or_fail(table, &mut outcomes).await;
        }
        outcomes
    }

    /// Publishes `table`; if that fails, every outcome that had succeeded
    /// carries the storage error instead.
    ///
    /// A topic whose partitions did not all open is answered
    /// KAFKA_STORAGE_ERROR naming the partition and the cause, and is put
    /// back as it was before (a new topic removed, with the files it made;
    /// added partitions dropped; a config change undone), so no request
    /// leaves a half-made topic behind.
    async fn publish_or_fail(self: &Rc<Self>, mut table: TopicTable, outcomes: &mut [TopicOutcome]) {
        let before = self.topics();
        let failed = match self.publish(table.clone()).await {
            Ok(failed) => failed,
            Err(e) => {
                for o in outcomes.iter_mut().filter(|o| o.error == errors::NONE) {
                    o.error = errors::KAFKA_STORAGE_ERROR;
                    o.message = Some(e.clone());
                }
                return;
            }
        };
        // Only partitions this change opened count against it: an old,
        // unrelated partition that still cannot open undoes nothing.
        let introduced = |topic: &str, partition: i32| match (before.topics.get(topic), table.topics.get(topic)) {
            (None, _) => true,
            (Some(old), Some(new)) => partition >= old.partitions() || old.configs != new.configs,
            (Some(_), None) => false,
        };
        let failed: Vec<_> = failed.into_iter().filter(|f| introduced(&f.topic, f.partition)).collect();
        let mut undo = false;
        for o in outcomes.iter_mut().filter(|o| o.error == errors::NONE) {
            let mine: Vec<_> = failed.iter().filter(|f| f.topic == o.name.as_str()).collect();
            let Some(OpenFailure { topic, partition, cause }) = mine.first() else { continue };
            o.error = errors::KAFKA_STORAGE_ERROR;
            o.message = Some(format!(
                "partition {topic}-{partition} could not be opened ({cause}){}; the change to {topic} was undone",
                if mine.len() > 1 { format!(" and {} more", mine.len() - 1) } else { String::new() }
            ));
            match before.topics.get(o.name.as_str()) {
                Some(meta) => table.topics.insert(o.name.as_str().into(), meta.clone()),
                None => table.topics.remove(o.name.as_str()),
            };
            undo = true;
        }
        if undo {
            // A partition that failed part-way may have made its directory;
            // the undo closes and removes only the ones that opened.
            let gone: Vec<_> = failed
                .iter()
                .filter(|f| before.topics.get(f.topic.as_str()).is_none_or(|old| f.partition >= old.partitions()))
                .map(|f| self.settings.data_dir.join(format!("{}-{}", f.topic, f.partition)))
                .collect();
            let removed = glommio::executor().spawn_blocking(move || {
                for dir in gone.iter().filter(|d| d.is_dir()) {
                    if let Err(e) = std::fs::remove_dir_all(dir) {
                        log::warn!("removing {} after a failed topic change: {e}", dir.display());
                    }
                }
            });
            removed.await;
            match self.publish(table).await {
                Ok(still) if still.is_empty() => {}
                Ok(still) => {
                    log::error!("shard {}: undoing a topic change left {} partitions unopened", self.id, still.len())
                }
                Err(e) => log::error!("shard {}: undoing a topic change: {e}", self.id),
            }
        }
    }

    /// Persists the table, then has every shard apply it; returns the
    /// partitions that did not open.
    pub(super) async fn publish(self: &Rc<Self>, table: TopicTable) -> Result<Vec<OpenFailure>, String> {
        let dir = self.settings.data_dir.clone();
        let to_save = table.clone();
        glommio::executor()
            .spawn_blocking(move || to_save.save(&dir))
            .await
            .map_err(|e| format!("cannot persist topic metadata: {e}"))?;
        let table = Arc::new(table);
        // A shard already gone (shutdown) has nothing left to open.
        let failed = self.ask_every(|| ApplyTopics { table: table.clone() }).await;
        let failed: Vec<OpenFailure> = failed.into_iter().flatten().flatten().collect();
        Ok(failed)
    }
}

/// A topic's result before any check: no error.
pub(super) fn outcome_for(name: &str, partitions: i32) -> TopicOutcome {
    TopicOutcome { name: name.to_string(), error: errors::NONE, message: None, id: [0; 16], partitions }
}

/// Puts a refusal into the topic's result. `Some` when the change is to be
/// applied: it passed its checks and this is not a dry run.
pub(super) fn settle<T>(outcome: &mut TopicOutcome, check: Result<T, Refusal>, validate_only: bool) -> Option<T> {
    match check {
        Err(refusal) => {
            outcome.error = refusal.code;
            outcome.message = Some(refusal.message);
            None
        }
        Ok(_) if validate_only => None,
        Ok(change) => Some(change),
    }
}

/// The configs `change` gives its topic, checked.
pub(super) fn changed_configs(
    table: &TopicTable,
    change: &ConfigChange,
) -> Result<std::collections::BTreeMap<String, String>, Refusal> {
    let Some(meta) = table.topics.get(change.topic.as_str()) else {
        return Err(Refusal::new(errors::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {} does not exist", change.topic)));
    };
    if meta.internal {
        return Err(Refusal::new(
            errors::INVALID_REQUEST,
            format!("{} is an internal topic; its configs are the broker's", change.topic),
        ));
    }
    topics::changed_configs(&meta.configs, change)
        .and_then(|configs| topics::log_config(&configs).map(|_| configs))
        .map_err(|e| Refusal::new(e.code(), format!("topic {}: {e}", change.topic)))
}

/// Why a CreatePartitions request for one topic is refused, as Kafka says it.
pub(super) fn check_new_partitions(table: &TopicTable, t: &NewPartitions) -> Result<(), Refusal> {
    let Some(meta) = table.topics.get(t.name.as_str()) else {
        return Err(Refusal::new(errors::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {} does not exist", t.name)));
    };
    if meta.internal {
        // Group placement hashes over the internal topic's partition count.
        return Err(Refusal::new(
            errors::INVALID_PARTITIONS,
            format!("{} is an internal topic; its partitions are fixed", t.name),
        ));
    }
    if t.count <= meta.partitions() {
        return Err(Refusal::new(
            errors::INVALID_PARTITIONS,
            format!(
                "topic {} currently has {} partitions, which is higher than or equal to the requested {}",
                t.name,
                meta.partitions(),
                t.count
            ),
        ));
    }
    if t.count > PARTITIONS_PER_TOPIC_MAX {
        return Err(Refusal::new(
            errors::INVALID_PARTITIONS,
            format!("partitions must be at most {PARTITIONS_PER_TOPIC_MAX}, got {}", t.count),
        ));
    }
    if t.replicas_per_partition > 1 {
        return Err(Refusal::new(
            errors::INVALID_REPLICA_ASSIGNMENT,
            format!(
                "an assignment of {} replicas per partition: partitions are not replicated yet, so it must be 1",
                t.replicas_per_partition
            ),
        ));
    }
    Ok(())
}
