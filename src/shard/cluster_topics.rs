//! Topics in a metadata quorum (`controller`): the quorum's log holds every
//! topic and the broker leading each partition; each broker keeps its own
//! topic table in step with the log and opens the partitions it leads.
//!
//! Topic changes go to the quorum's leader through this broker's member
//! (`ClusterLink::ask`) and come back as log entries, applied by the
//! controller shard (`follow_cluster`) like any local change: persisted,
//! then published to every shard. Each shard's own copy of the table then
//! says which partitions another broker leads (`TopicTable::led_elsewhere`),
//! so produce and fetch learn NOT_LEADER_OR_FOLLOWER without a lock.
//!
//! `__consumer_offsets` and `__transaction_state` are the quorum's,
//! replicated like any topic and created once enough brokers are live
//! (`ask_for_internal_topics`): the group and transaction coordinators
//! move with their partitions' leaders (`coordinator_leadership`).

use std::{collections::BTreeMap, rc::Rc, time::Duration};

use crate::{
    controller::{BrokerAnswer, BrokerRequest, ClusterLink, ClusterTopic, TopicAlteration, TopicResult, TopicSpec},
    protocol::errors,
    shard::{
        messages::{ConfigChange, NewPartitions, NewTopic, TopicOutcome},
        router,
        topic_admin::{changed_configs, check_new_partitions, outcome_for, settle},
        topic_errors::Refusal,
        topics::{ReplicaSets, TopicHandle, TopicMeta, TopicTable},
        Shard,
    },
};

/// How long a topic change waits for its log entry to reach this broker's
/// table, and for a leader to be elected, before it answers.
const SETTLE_LIMIT: Duration = Duration::from_secs(8);

impl Shard {
    /// Controller shard, in a quorum: brings the topic table up to every
    /// view of the log the quorum publishes, until the quorum stops.
    pub async fn follow_cluster(self: Rc<Self>, link: ClusterLink) {
        let mut view = link.view.clone();
        let asking = Rc::new(std::cell::Cell::new(false));
        loop {
            let (applied, topics, acls, credentials, registered, live, racks) = {
                let v = view.borrow_and_update();
                let me = v.brokers.get(&self.settings.node_id);
                let registered = me.is_some_and(|b| !b.fenced && b.info.incarnation == link.incarnation);
                let live = v.brokers.values().filter(|b| !b.fenced).count();
                let racks: BTreeMap<i32, String> = v
                    .brokers
                    .iter()
                    .filter(|(_, b)| !b.fenced)
                    .filter_map(|(&id, b)| Some((id, b.info.rack.clone()?)))
                    .collect();
                (v.applied, v.topics.clone(), v.acls.clone(), v.credentials.clone(), registered, live, racks)
            };
            if registered {
                self.ask_for_internal_topics(&link, &topics, live, &asking);
            }
            self.apply_cluster_topics(applied, topics, registered).await;
            self.apply_cluster_security(applied, acls, credentials).await;
            self.apply_cluster_racks(racks).await;
            self.cluster_synced.set(applied);
            if view.changed().await.is_err() {
                return;
            }
        }
    }

    /// Has the quorum create `__consumer_offsets` and `__transaction_state`,
    /// replicated, once as many brokers are live as their replication
    /// factor (Kafka creates each at its first FindCoordinator; here the
    /// coordinators need not wait for it). Until one exists,
    /// FindCoordinator for its keys answers COORDINATOR_NOT_AVAILABLE.
    /// Every broker may ask; the log keeps the first.
    fn ask_for_internal_topics(
        self: &Rc<Self>,
        link: &ClusterLink,
        topics: &BTreeMap<String, ClusterTopic>,
        live: usize,
        asking: &Rc<std::cell::Cell<bool>>,
    ) {
        let specs: Vec<TopicSpec> = self
            .settings
            .internal_topics
            .iter()
            .filter(|s| !topics.contains_key(&s.name) && live >= s.replication_factor as usize)
            .cloned()
            .collect();
        if specs.is_empty() || asking.replace(true) {
            return;
        }
        let (shard, link, asking) = (self.clone(), link.clone(), asking.clone());
        glommio::spawn_local(async move {
            let missing = |link: &ClusterLink| {
                let view = link.view.borrow();
                specs.iter().filter(|s| !view.topics.contains_key(&s.name)).cloned().collect::<Vec<_>>()
            };
            // Until the log has them: a quorum between leaders is asked again.
            loop {
                let asked = missing(&link);
                if asked.is_empty() {
                    break;
                }
                match shard.ask_topics(&link, BrokerRequest::CreateTopics(asked)).await {
                    Ok(results) => {
                        for r in results {
                            match r.error {
                                errors::NONE => log::info!("shard {}: created {} in the quorum", shard.id, r.name),
                                errors::TOPIC_ALREADY_EXISTS => {}
                                _ => log::warn!("shard {}: cannot create {} yet: {:?}", shard.id, r.name, r.message),
                            }
                        }
                    }
                    Err(e) => log::warn!("shard {}: cannot create the internal topics yet: {e}", shard.id),
                }
                glommio::timer::sleep(Duration::from_millis(500)).await;
            }
            asking.set(false);
        })
        .detach();
    }

    /// Makes the table's quorum topics those of the log at `applied`: new
    /// topics added (their partitions opened where this broker leads),
    /// deleted ones removed with their files. Topics the broker had before
    /// it joined a quorum, and the internal ones, are left as they are.
    /// Until the log holds this process's registration, this broker leads
    /// none of them (`TopicTable::disown`).
    async fn apply_cluster_topics(
        self: &Rc<Self>,
        applied: u64,
        topics: BTreeMap<String, ClusterTopic>,
        registered: bool,
    ) {
        let _permit = self.controller_permit.acquire_permit(1).await.expect("controller permit: never closed");
        let before = self.topics();
        if applied <= before.cluster_index {
            return;
        }
        let mut table = (*before).clone();
        table
            .topics
            .retain(|name, meta| meta.internal || meta.leaders.is_empty() || topics.contains_key(name.as_str()));
        for (name, mut topic) in topics {
            let partitions = topic.leaders.len() as i32;
            topic.fill_out();
            let replicas = ReplicaSets {
                replicas: std::mem::take(&mut topic.replicas),
                isr: std::mem::take(&mut topic.isr),
                epochs: std::mem::take(&mut topic.epochs),
            };
            if let Some(meta) = table.topics.get_mut(name.as_str()).filter(|m| m.id == topic.id) {
                // Grown partitions are placed as if the topic had been
                // created with the new count; configs are replaced whole.
                let placed = router::assign(&name, partitions, self.count);
                let have = meta.shards.len().min(placed.len());
                meta.shards.extend_from_slice(&placed[have..]);
                meta.leaders = topic.leaders;
                meta.replicas = replicas;
                meta.configs = topic.configs;
            } else {
                if table.topics.contains_key(name.as_str()) {
                    log::warn!("shard {}: topic {name} of the quorum replaces this broker's own topic", self.id);
                }
                let meta = TopicMeta {
                    id: topic.id,
                    shards: router::assign(&name, partitions, self.count),
                    configs: topic.configs,
                    internal: self.settings.internal_topics.iter().any(|t| t.name == name),
                    leaders: topic.leaders,
                    replicas,
                };
                table.topics.insert(TopicHandle::from(name.as_str()), meta);
            }
        }
        if !registered {
            table.disown(self.settings.node_id);
        }
        // Most entries (registrations, fences, ACLs) leave the topics as
        // they are: nothing to persist or publish. The index moves with
        // the topics only, which is all the guard above needs.
        if table == *before {
            return;
        }
        table.cluster_index = applied;
        match self.publish(table).await {
            Ok(failed) => {
                for f in failed {
                    log::error!(
                        "shard {}: partition {}-{} could not be opened: {}",
                        self.id,
                        f.topic,
                        f.partition,
                        f.cause
                    );
                }
            }
            Err(e) => log::error!("shard {}: cannot apply the quorum's topics (log index {applied}): {e}", self.id),
        }
    }

    /// Controller shard, in a quorum: checks new topics here, has the
    /// leader place and log them, and answers once this broker's table
    /// holds them.
    pub(super) async fn create_cluster_topics(
        self: &Rc<Self>,
        link: &ClusterLink,
        requested: Vec<NewTopic>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        let table = self.topics();
        let checked = requested.into_iter().map(|t| {
            let partitions = if t.partitions == -1 { self.settings.default_partitions } else { t.partitions };
            let configs: BTreeMap<String, String> = t.configs.iter().cloned().collect();
            let mut outcome = outcome_for(&t.name, partitions);
            let check = self.check_new_topic(&table, &t, partitions, &configs);
            let replication_factor = t.replication_factor.max(1);
            let spec = check.map(|()| TopicSpec { name: t.name.clone(), partitions, configs, replication_factor });
            let asked = settle(&mut outcome, spec, validate_only);
            (outcome, asked)
        });
        self.through_quorum(link, checked.collect(), BrokerRequest::CreateTopics).await
    }

    /// Controller shard, in a quorum: has the leader remove topics from the
    /// log; answers once this broker's table no longer holds them.
    pub(super) async fn delete_cluster_topics(
        self: &Rc<Self>,
        link: &ClusterLink,
        names: Vec<String>,
    ) -> Vec<TopicOutcome> {
        let table = self.topics();
        let checked = names.into_iter().map(|name| {
            let mut outcome = outcome_for(&name, 0);
            let check = match table.topics.get(name.as_str()) {
                Some(m) if m.internal => Err(Refusal::new(
                    errors::INVALID_TOPIC_EXCEPTION,
                    format!("{name} is an internal topic and cannot be deleted"),
                )),
                _ => only_quorum(&table, &name),
            };
            let asked = settle(&mut outcome, check.map(|()| name.clone()), false);
            (outcome, asked)
        });
        self.through_quorum(link, checked.collect(), BrokerRequest::DeleteTopics).await
    }

    /// Controller shard, in a quorum: CreatePartitions, checked here and
    /// placed by the leader.
    pub(super) async fn grow_cluster_topics(
        self: &Rc<Self>,
        link: &ClusterLink,
        requested: Vec<NewPartitions>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        let table = self.topics();
        let checked = requested.into_iter().map(|t| {
            let mut outcome = outcome_for(&t.name, t.count);
            let grows_by = table.topics.get(t.name.as_str()).map_or(0, |m| t.count - m.partitions());
            let check = only_quorum(&table, &t.name)
                .and_then(|()| check_new_partitions(&table, &t))
                .and_then(|()| self.room_for(&table, grows_by));
            let change = TopicAlteration::Partitions {
                name: t.name.clone(),
                count: t.count,
                leaders: Vec::new(),
                replicas: Vec::new(),
            };
            let asked = settle(&mut outcome, check.map(|()| change), validate_only);
            (outcome, asked)
        });
        self.through_quorum(link, checked.collect(), BrokerRequest::AlterTopics).await
    }

    /// Controller shard, in a quorum: AlterConfigs and
    /// IncrementalAlterConfigs, checked here; the log carries the topic's
    /// whole new config set.
    pub(super) async fn configure_cluster_topics(
        self: &Rc<Self>,
        link: &ClusterLink,
        changes: Vec<ConfigChange>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        let table = self.topics();
        let checked = changes.into_iter().map(|change| {
            let mut outcome = outcome_for(&change.topic, 0);
            let check = only_quorum(&table, &change.topic).and_then(|()| changed_configs(&table, &change));
            let change = check.map(|configs| TopicAlteration::Configs { name: change.topic.clone(), configs });
            let asked = settle(&mut outcome, change, validate_only);
            (outcome, asked)
        });
        self.through_quorum(link, checked.collect(), BrokerRequest::AlterTopics).await
    }

    /// Sends what passed the checks here (`Some`) to the leader as one
    /// request made by `request`, and puts its results into their
    /// outcomes; the others keep their refusal (or, validated only, no
    /// error) and the quorum is not asked for them.
    async fn through_quorum<T: Named>(
        self: &Rc<Self>,
        link: &ClusterLink,
        checked: Vec<(TopicOutcome, Option<T>)>,
        request: impl FnOnce(Vec<T>) -> BrokerRequest,
    ) -> Vec<TopicOutcome> {
        let (mut outcomes, asked): (Vec<TopicOutcome>, Vec<Option<T>>) = checked.into_iter().unzip();
        let asked: Vec<T> = asked.into_iter().flatten().collect();
        if asked.is_empty() {
            return outcomes;
        }
        let names: Vec<String> = asked.iter().map(|a| a.topic().to_string()).collect();
        let answers = self.ask_topics(link, request(asked)).await;
        let sent = outcomes.iter_mut().filter(|o| o.error == errors::NONE && names.contains(&o.name));
        match answers {
            Ok(results) => {
                for o in sent {
                    if let Some(r) = results.iter().find(|r| r.name == o.name) {
                        o.error = r.error;
                        o.message = r.message.clone();
                        o.id = r.id;
                    }
                }
            }
            Err(e) => {
                for o in sent {
                    o.error = errors::REQUEST_TIMED_OUT;
                    o.message = Some(format!("topic {}: {e}", o.name));
                }
            }
        }
        outcomes
    }

    /// Asks the leader (waiting out an election), then waits until this
    /// broker has applied the log up to the change, so a client that asks
    /// this broker next sees what it was told. The leader's answer, or why
    /// there is none.
    pub(super) async fn ask_quorum(
        self: &Rc<Self>,
        link: &ClusterLink,
        request: BrokerRequest,
    ) -> Result<BrokerAnswer, String> {
        let deadline = std::time::Instant::now() + SETTLE_LIMIT;
        let answer = loop {
            match link.ask(request.clone()).await {
                BrokerAnswer::NotLeader if std::time::Instant::now() < deadline => {
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                }
                BrokerAnswer::NotLeader => return Err("the controller quorum has no leader".into()),
                BrokerAnswer::Failed(e) => return Err(format!("the controller quorum: {e}")),
                BrokerAnswer::Ok => return Err("the controller quorum gave no results".into()),
                answer => break answer,
            }
        };
        let index = answer.index();
        while self.cluster_synced.get() < index {
            if std::time::Instant::now() >= deadline {
                log::warn!("shard {}: log index {index} not applied here within {SETTLE_LIMIT:?}", self.id);
                break;
            }
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
        Ok(answer)
    }

    async fn ask_topics(
        self: &Rc<Self>,
        link: &ClusterLink,
        request: BrokerRequest,
    ) -> Result<Vec<TopicResult>, String> {
        match self.ask_quorum(link, request).await? {
            BrokerAnswer::Topics { results, .. } => Ok(results),
            other => Err(format!("the controller quorum answered a topic change with {other:?}")),
        }
    }
}

/// What a topic change asked of the quorum is about.
trait Named {
    fn topic(&self) -> &str;
}

impl Named for TopicSpec {
    fn topic(&self) -> &str {
        &self.name
    }
}

impl Named for String {
    fn topic(&self) -> &str {
        self
    }
}

impl Named for TopicAlteration {
    fn topic(&self) -> &str {
        TopicAlteration::topic(self)
    }
}

/// A topic this broker had before it joined the quorum cannot be changed
/// through it (the quorum does not know it). Internal topics and unknown
/// names pass, for the usual checks to refuse them in Kafka's words.
fn only_quorum(table: &TopicTable, topic: &str) -> Result<(), Refusal> {
    match table.topics.get(topic) {
        Some(m) if m.leaders.is_empty() && !m.internal => Err(Refusal::new(
            errors::INVALID_REQUEST,
            format!("topic {topic} is this broker's own, from before it joined the quorum; it can only be changed with the broker alone"),
        )),
        _ => Ok(()),
    }
}
