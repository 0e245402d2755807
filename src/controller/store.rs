//! The controller's Raft log and state machine, in files under
//! `<data-dir>/controller/`.
//!
//! - `log.jsonl`: a header line (the last purged log id), then one entry per
//!   line. An append writes its lines and `fdatasync`s before openraft is
//!   told the entries are durable. Truncation and purging rewrite the file
//!   (write a temporary file, sync it, rename it over, sync the directory):
//!   both are rare, a leader change or a snapshot.
//! - `vote.json` and `committed.json`: replaced the same way.
//! - `snapshot.json`: the state machine as of its last applied entry. The
//!   state machine itself is memory only: a restart loads the snapshot and
//!   openraft applies the committed entries after it again.
//!
//! A crash can tear the last line of `log.jsonl`; loading drops a last line
//! that does not parse (it was never reported durable) and refuses a bad
//! line anywhere else, naming the file and line.

use std::{
    collections::BTreeMap,
    fs::{File, OpenOptions},
    io::{BufRead, BufReader, Cursor, Write},
    ops::RangeBounds,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use openraft::{
    storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot},
    Entry, EntryPayload, LogId, OptionalSend, RaftLogReader, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership, Vote,
};
use serde::{Deserialize, Serialize};

use super::{ClusterState, Command, Published, TypeConfig};
// A crash leaves the old file or the new one, never a mix.
use crate::storage::file::write_atomically as replace_file;

type NodeId = u64;
type Node = openraft::BasicNode;
type StorageResult<T> = Result<T, StorageError<NodeId>>;

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> std::io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

#[derive(Serialize, Deserialize, Default)]
struct LogHeader {
    purged: Option<LogId<NodeId>>,
}

/// The entries held and the file they are appended to.
struct LogInner {
    dir: PathBuf,
    purged: Option<LogId<NodeId>>,
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    file: File,
}

impl LogInner {
    fn log_path(dir: &Path) -> PathBuf {
        dir.join("log.jsonl")
    }

    fn load(dir: &Path) -> std::io::Result<Self> {
        let path = Self::log_path(dir);
        let mut header = LogHeader::default();
        let mut entries = BTreeMap::new();
        match File::open(&path) {
            Ok(f) => {
                let lines: Vec<String> = BufReader::new(f).lines().collect::<Result<_, _>>()?;
                let last = lines.len().saturating_sub(1);
                for (i, line) in lines.iter().enumerate() {
                    let bad = |e: serde_json::Error| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("{} line {}: {e}", path.display(), i + 1),
                        )
                    };
                    if i == 0 {
                        header = serde_json::from_str(line).map_err(bad)?;
                        continue;
                    }
                    match serde_json::from_str::<Entry<TypeConfig>>(line) {
                        Ok(e) => {
                            entries.insert(e.log_id.index, e);
                        }
                        // A torn last line was never reported durable.
                        Err(_) if i == last => log::warn!("{}: dropped a torn last line", path.display()),
                        Err(e) => return Err(bad(e)),
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // Rewritten at once: a torn line must not stay ahead of new appends.
        let file = Self::write_whole(dir, header.purged, &entries)?;
        Ok(Self { dir: dir.to_path_buf(), purged: header.purged, entries, file })
    }

    /// Writes the whole log anew and reopens it for appends.
    fn rewrite(&mut self) -> std::io::Result<()> {
        self.file = Self::write_whole(&self.dir, self.purged, &self.entries)?;
        Ok(())
    }

    fn write_whole(
        dir: &Path,
        purged: Option<LogId<NodeId>>,
        entries: &BTreeMap<u64, Entry<TypeConfig>>,
    ) -> std::io::Result<File> {
        let mut text = serde_json::to_string(&LogHeader { purged })?;
        text.push('\n');
        for e in entries.values() {
            text.push_str(&serde_json::to_string(e)?);
            text.push('\n');
        }
        let path = Self::log_path(dir);
        replace_file(&path, text.as_bytes())?;
        OpenOptions::new().append(true).open(&path)
    }

    fn append(&mut self, entries: Vec<Entry<TypeConfig>>) -> std::io::Result<()> {
        let mut text = String::new();
        for e in &entries {
            text.push_str(&serde_json::to_string(e)?);
            text.push('\n');
        }
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()?;
        for e in entries {
            self.entries.insert(e.log_id.index, e);
        }
        Ok(())
    }
}

/// The Raft log: appends are durable before openraft hears of them.
///
/// A lock, off the data path: openraft reads the log through a clone of
/// this store (`LogReader`) from its replication tasks while its core
/// appends; all of it on the controller thread, never on a shard, and no
/// guard is held across an await.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogInner>>,
}

impl LogStore {
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self { inner: Arc::new(Mutex::new(LogInner::load(dir)?)) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        // A panic while holding it would have ended the controller thread.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        Ok(self.lock().entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let inner = self.lock();
        let last = inner.entries.values().next_back().map(|e| e.log_id).or(inner.purged);
        Ok(LogState { last_purged_log_id: inner.purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StorageResult<()> {
        let dir = self.lock().dir.clone();
        let bytes = serde_json::to_vec(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        replace_file(&dir.join("vote.json"), &bytes).map_err(|e| StorageIOError::write_vote(&e))?;
        Ok(())
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        let dir = self.lock().dir.clone();
        Ok(read_json(&dir.join("vote.json")).map_err(|e| StorageIOError::read_vote(&e))?)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StorageResult<()> {
        let dir = self.lock().dir.clone();
        let bytes = serde_json::to_vec(&committed).map_err(|e| StorageIOError::write(&e))?;
        replace_file(&dir.join("committed.json"), &bytes).map_err(|e| StorageIOError::write(&e))?;
        Ok(())
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId<NodeId>>> {
        let dir = self.lock().dir.clone();
        let committed: Option<Option<LogId<NodeId>>> =
            read_json(&dir.join("committed.json")).map_err(|e| StorageIOError::read(&e))?;
        Ok(committed.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let result = self.lock().append(entries.into_iter().collect());
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let err = StorageIOError::write_logs(&e);
                callback.log_io_completed(Err(e));
                Err(err.into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let mut inner = self.lock();
        let _ = inner.entries.split_off(&log_id.index);
        inner.rewrite().map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let mut inner = self.lock();
        let kept = inner.entries.split_off(&(log_id.index + 1));
        inner.entries = kept;
        inner.purged = Some(log_id);
        inner.rewrite().map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }
}

/// What `snapshot.json` holds.
#[derive(Serialize, Deserialize, Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, Node>,
    state: ClusterState,
}

/// What has been applied from the log: the cluster state, the last entry
/// in it and the membership of the quorum.
#[derive(Clone, Default)]
struct Applied {
    last: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, Node>,
    state: ClusterState,
}

/// The cluster state applied from the log, published to the shards after
/// every change (`Published`).
pub struct StateMachine {
    dir: PathBuf,
    applied: Applied,
    published: Published,
    snapshots_built: u64,
}

impl StateMachine {
    pub fn open(dir: &Path, published: Published) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut sm = Self { dir: dir.to_path_buf(), applied: Applied::default(), published, snapshots_built: 0 };
        if let Some(s) = read_json::<StoredSnapshot>(&sm.snapshot_path())? {
            sm.applied = Applied { last: s.meta.last_log_id, membership: s.meta.last_membership, state: s.state };
        }
        sm.publish();
        Ok(sm)
    }

    fn snapshot_path(&self) -> PathBuf {
        self.dir.join("snapshot.json")
    }

    fn publish(&self) {
        let state = self.applied.state.clone();
        let applied = self.applied.last.map_or(0, |l| l.index);
        self.published.send_modify(|v| {
            v.brokers = state.brokers;
            v.topics = state.topics;
            v.acls = state.acls;
            v.credentials = state.credentials;
            v.applied = applied;
        });
    }

    /// `snapshot.json`'s bytes and the snapshot openraft is handed.
    fn snapshot_of(
        meta: SnapshotMeta<NodeId, Node>,
        state: &ClusterState,
    ) -> serde_json::Result<(Vec<u8>, Snapshot<TypeConfig>)> {
        let stored = StoredSnapshot { meta: meta.clone(), state: state.clone() };
        let bytes = serde_json::to_vec(&stored)?;
        let data = serde_json::to_vec(state)?;
        Ok((bytes, Snapshot { meta, snapshot: Box::new(Cursor::new(data)) }))
    }
}

/// A copy of the state machine taken when openraft asks for a snapshot.
pub struct SnapshotBuilder {
    dir: PathBuf,
    applied: Applied,
    id: String,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let meta = SnapshotMeta {
            last_log_id: self.applied.last,
            last_membership: self.applied.membership.clone(),
            snapshot_id: self.id.clone(),
        };
        let (bytes, snapshot) = StateMachine::snapshot_of(meta, &self.applied.state)
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        replace_file(&self.dir.join("snapshot.json"), &bytes)
            .map_err(|e| StorageIOError::write_snapshot(Some(snapshot.meta.signature()), &e))?;
        Ok(snapshot)
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, Node>)> {
        Ok((self.applied.last, self.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<()>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut answers = Vec::new();
        for entry in entries {
            let applied = &mut self.applied;
            applied.last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(command) => applied.state.apply(command),
                EntryPayload::Membership(m) => applied.membership = StoredMembership::new(Some(entry.log_id), m),
            }
            answers.push(());
        }
        self.publish();
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshots_built += 1;
        let index = self.applied.last.map_or(0, |l| l.index);
        SnapshotBuilder {
            dir: self.dir.clone(),
            applied: self.applied.clone(),
            id: format!("{index}-{}", self.snapshots_built),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Node>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let state: ClusterState = serde_json::from_slice(snapshot.get_ref())
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let (bytes, _) = Self::snapshot_of(meta.clone(), &state)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        replace_file(&self.snapshot_path(), &bytes)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.applied = Applied { last: meta.last_log_id, membership: meta.last_membership.clone(), state };
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let stored =
            read_json::<StoredSnapshot>(&self.snapshot_path()).map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        match stored {
            None => Ok(None),
            Some(s) => {
                let snapshot =
                    Self::snapshot_of(s.meta, &s.state).map_err(|e| StorageIOError::read_snapshot(None, &e))?;
                Ok(Some(snapshot.1))
            }
        }
    }
}

impl ClusterState {
    /// A fenced broker (dead, or restarted and not registered again yet)
    /// joins nothing: acks=all would wait for it.
    /// `c.broker` joins an in-sync set; a move it was the last target
    /// replica out of sync for finishes (`reassign`).
    fn join_isr(&mut self, c: &crate::controller::IsrChange) {
        let fenced = self.brokers.get(&c.broker).is_none_or(|b| b.fenced);
        let brokers = &self.brokers;
        let is_fenced = |n: i32| brokers.get(&n).is_none_or(|b| b.fenced);
        if let Some(t) = self.topics.get_mut(&c.topic).filter(|_| !fenced) {
            t.change_isr(c, true);
            t.finish_move(c.partition as usize, is_fenced);
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::RegisterBroker(b) => {
                let id = b.node_id;
                let restarted = self.brokers.get(&id).is_some_and(|e| !e.fenced && e.info.incarnation != b.incarnation);
                if restarted {
                    // Fenced and unfenced at once, as a new process.
                    if let Some(e) = self.brokers.get_mut(&id) {
                        e.fenced = true;
                    }
                    let brokers = &self.brokers;
                    let is_fenced = |n: i32| brokers.get(&n).is_none_or(|b| b.fenced);
                    for topic in self.topics.values_mut() {
                        topic.fence(id, is_fenced);
                    }
                }
                self.brokers.insert(id, super::BrokerEntry { info: b, fenced: false });
                let brokers = &self.brokers;
                let is_fenced = |n: i32| brokers.get(&n).is_none_or(|b| b.fenced);
                for topic in self.topics.values_mut() {
                    topic.unfence(id, is_fenced);
                }
            }
            Command::FenceBroker(id) => {
                if let Some(b) = self.brokers.get_mut(&id) {
                    b.fenced = true;
                }
                let brokers = &self.brokers;
                let is_fenced = |n: i32| brokers.get(&n).is_none_or(|b| b.fenced);
                for topic in self.topics.values_mut() {
                    topic.fence(id, is_fenced);
                }
            }
            Command::JoinIsr(c) => self.join_isr(&c),
            Command::JoinIsrs(changes) => {
                for c in &changes {
                    self.join_isr(c);
                }
            }
            Command::LeaveIsr(c) => {
                if let Some(t) = self.topics.get_mut(&c.topic) {
                    t.change_isr(&c, false);
                }
            }
            Command::ElectLeaders(moves) => {
                for e in &moves {
                    if let Some(t) = self.topics.get_mut(&e.topic) {
                        t.elect(e);
                    }
                }
            }
            Command::Reassign(moves) => {
                let brokers = &self.brokers;
                let is_fenced = |n: i32| brokers.get(&n).is_none_or(|b| b.fenced);
                for m in moves {
                    if let Some(t) = self.topics.get_mut(&m.topic).filter(|_| m.partition >= 0) {
                        t.reassign(m.partition as usize, m.replicas, is_fenced);
                    }
                }
            }
            Command::CreateTopics(topics) => {
                for t in topics {
                    self.topics.entry(t.name.clone()).or_insert(t);
                }
            }
            Command::DeleteTopics(names) => {
                for name in names {
                    self.topics.remove(&name);
                }
            }
            Command::AlterTopics(changes) => {
                for change in changes {
                    let Some(topic) = self.topics.get_mut(change.topic()) else { continue };
                    match change {
                        super::TopicAlteration::Partitions { count, leaders, replicas, .. } => {
                            // Two growths raced: the first logged wins.
                            if topic.leaders.len() + leaders.len() == count as usize {
                                topic.fill_out();
                                let replicas: Vec<Vec<i32>> = leaders
                                    .iter()
                                    .enumerate()
                                    .map(|(i, &l)| replicas.get(i).cloned().unwrap_or_else(|| vec![l]))
                                    .collect();
                                topic.isr.extend(replicas.iter().cloned());
                                topic.replicas.extend(replicas);
                                topic.epochs.extend(std::iter::repeat_n(0, leaders.len()));
                                topic.leaders.extend(leaders);
                            }
                        }
                        super::TopicAlteration::Configs { configs, .. } => topic.configs = configs,
                    }
                }
            }
            Command::ChangeAcls(change) => {
                let current = self.acls.take().unwrap_or_default();
                self.acls = Some(crate::shard::acl_admin::acls_changed(&current, &change).0);
            }
            Command::AlterCredentials(changes) => {
                let mut credentials = self.credentials.take().unwrap_or_default();
                for change in &changes {
                    // Checked by the leader; a change a racing one made
                    // unacceptable is skipped here, the same on every member.
                    let _ = crate::shard::credentials_admin::apply(&mut credentials, change);
                }
                self.credentials = Some(credentials);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Builder;

    impl openraft::testing::StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
        async fn build(&self) -> StorageResult<(tempfile::TempDir, LogStore, StateMachine)> {
            let dir = tempfile::tempdir().map_err(|e| StorageIOError::write(&e))?;
            let log = LogStore::open(dir.path()).map_err(|e| StorageIOError::write(&e))?;
            let (published, _) = tokio::sync::watch::channel(Default::default());
            let sm = StateMachine::open(dir.path(), Arc::new(published)).map_err(|e| StorageIOError::write(&e))?;
            Ok((dir, log, sm))
        }
    }

    #[test]
    fn a_fenced_broker_joins_no_in_sync_set() {
        let mut state = ClusterState::default();
        for (id, fenced) in [(1, false), (2, false), (3, true)] {
            let info = crate::controller::BrokerInfo {
                node_id: id,
                listeners: Vec::new(),
                incarnation: 1,
                shard_ports: Vec::new(),
                rack: None,
                directory_id: None,
            };
            state.brokers.insert(id, crate::controller::BrokerEntry { info, fenced });
        }
        state.topics.insert(
            "t".into(),
            crate::controller::ClusterTopic {
                name: "t".into(),
                id: crate::shard::topics::new_topic_id(),
                leaders: vec![1],
                configs: Default::default(),
                replicas: vec![vec![1, 2, 3]],
                isr: vec![vec![1]],
                epochs: vec![0],
                moving: Default::default(),
            },
        );
        let join = |broker| {
            Command::JoinIsrs(vec![crate::controller::IsrChange { topic: "t".into(), partition: 0, broker, epoch: 0 }])
        };
        state.apply(join(3));
        assert_eq!(state.topics["t"].isr[0], vec![1], "broker 3 is fenced");
        state.apply(join(2));
        assert_eq!(state.topics["t"].isr[0], vec![1, 2]);
    }

    /// openraft's own conformance suite for log stores and state machines.
    #[test]
    fn the_store_passes_openraft_suite() {
        openraft::testing::Suite::test_all(Builder).unwrap();
    }

    #[test]
    fn a_reopened_log_holds_what_was_appended_and_drops_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let entry = |index| Entry::<TypeConfig> {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 0), index),
            payload: EntryPayload::Blank,
        };
        {
            let mut inner = LogInner::load(dir.path()).unwrap();
            inner.append(vec![entry(1), entry(2)]).unwrap();
        }
        let path = LogInner::log_path(dir.path());
        OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"log_id\":").unwrap();
        let inner = LogInner::load(dir.path()).unwrap();
        assert_eq!(inner.entries.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        // The torn line is gone from the file too, so appends follow a whole line.
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("}\n"), "{text}");
    }
}
