//! One client connection: read a size-prefixed frame, decode its header,
//! dispatch it, write the response. Requests on a connection are answered in
//! order. A malformed frame, an unknown API key or an oversized length closes
//! this connection only, logged with the peer address.

use std::{
    cell::RefCell,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll},
    time::Instant,
};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_lite::AsyncReadExt;
use glommio::{net::TcpStream, sync::StaticPermit};
use kafka_protocol::{
    messages::*,
    protocol::{Decodable, Encodable},
};
use std::sync::Arc;

use crate::{
    limits,
    metrics::stages::{RequestTrace, Stage},
    protocol::claimed_counts,
    security::{sasl::SaslExchange, SecurityProtocol, Session},
    server::{
        authenticate::{self, Gate},
        authz,
        handlers::{self, api_versions},
        tls::{
            stream::{TlsStream, Transport},
            TlsState,
        },
    },
    shard::Shard,
    storage::Chunk,
};

/// Smallest valid frame: api key, api version, correlation id.
const FRAME_BYTES_MIN: usize = 8;

/// A connection's stream, read by the frame reader and written by the
/// response writer, which run as two tasks on the same shard. Each poll
/// borrows it briefly; no borrow outlives a poll.
#[derive(Clone)]
pub(super) struct SharedStream(Rc<RefCell<Transport>>);

impl futures_lite::AsyncRead for SharedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_read(cx, buf)
    }
}

impl futures_lite::AsyncWrite for SharedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_flush(cx)
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_close(cx)
    }
}

/// What the reader hands the writer, in request order. The permits hold
/// the request's bytes against the connection's and the shard's in-flight
/// budgets until its response is written.
pub(super) enum Next {
    Response(Pending, [StaticPermit; 2]),
    Close(String),
}

/// A request being handled: its handler task and its stage laps.
pub(super) struct Pending {
    pub(super) task: glommio::task::JoinHandle<Result<Option<Vec<Chunk>>, String>>,
    pub(super) api_key: i16,
    pub(super) trace: Rc<RequestTrace>,
}

/// Counts a connection for `max_connections` while it lives.
struct Counted(Rc<Shard>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.connections.set(self.0.connections.get() - 1);
    }
}

/// Serves one connection: a reader task decodes frames and starts a handler
/// task for each (so a client's pipelined requests run concurrently and
/// durable produces share fsyncs), while this task writes the responses in
/// request order. At most `REQUESTS_IN_FLIGHT_MAX` are outstanding.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream, door: Rc<Door>) {
    let peer = stream.peer_addr().map_or_else(|_| "unknown peer".to_string(), |a| a.to_string());
    let session = Rc::new(Session::new(peer.clone(), door.name.clone(), door.protocol));
    if shard.connections.get() >= shard.settings.max_connections_per_shard {
        log::warn!(
            "refusing connection from {peer}: shard {} already has {} connections (max_connections)",
            shard.id,
            shard.connections.get()
        );
        return;
    }
    shard.connections.set(shard.connections.get() + 1);
    let _counted = Counted(shard.clone());
    let _ = stream.set_nodelay(true);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    if let Err(e) = crate::server::send::set_nonblocking(fd) {
        log::warn!("closing connection from {peer}: cannot make its socket non-blocking: {e}");
        return;
    }
    let transport = match &door.tls {
        None => Transport::Plain(stream),
        Some(tls) => match accept_tls(stream, fd, tls, &session).await {
            Ok(t) => Transport::Tls(Box::new(t)),
            Err(e) => {
                crate::server::tls::report_failed_handshake(&peer, &door.name, &e);
                *shard.metrics.tls_handshake_failures.borrow_mut().entry(door.name.to_string()).or_default() += 1;
                return;
            }
        },
    };
    let encrypted = door.tls.is_some();
    let stream = SharedStream(Rc::new(RefCell::new(transport)));
    let (tx, rx) = glommio::channels::local_channel::new_bounded::<Next>(limits::REQUESTS_IN_FLIGHT_MAX);
    let reader = glommio::spawn_local(read_frames(shard.clone(), stream.clone(), tx, session.clone())).detach();
    crate::server::response_writer::write_responses(&shard, &rx, fd, stream, encrypted, &peer).await;
    reader.cancel();
    // A follower's connection gone: if its process is gone too, the quorum
    // takes it out of the in-sync replicas now rather than after its
    // session, and acks=all stops waiting for it.
    if session.replica.get() >= 0 {
        shard.report_unreachable(session.replica.get(), std::time::Duration::from_secs(10));
    }
}

/// The listener a connection came in on, as its shard's accept loop
/// hands it over.
pub struct Door {
    pub name: Rc<str>,
    pub protocol: SecurityProtocol,
    /// The TLS server configuration, for SSL and SASL_SSL listeners.
    pub tls: Option<Arc<TlsState>>,
}

/// The TLS handshake, with the configuration current when it starts
/// (a SIGHUP reload affects connections accepted after it). A client that
/// showed a certificate becomes its subject's principal.
async fn accept_tls(stream: TcpStream, fd: i32, tls: &TlsState, session: &Session) -> std::io::Result<TlsStream> {
    let connection = rustls::ServerConnection::new(tls.current())
        .map_err(|e| std::io::Error::other(format!("cannot start a TLS session: {e}")))?;
    let mut stream = TlsStream::new(stream, connection, fd);
    crate::server::tls::stream::handshake(&mut stream).await?;
    if let Some(cert) = stream.connection().peer_certificates().and_then(|c| c.first()) {
        let dn = crate::server::tls::subject_dn(cert)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        *session.principal.borrow_mut() = crate::security::Principal::user(dn);
    }
    log::debug!("TLS connection from {} on listener {} as {}", session.peer, session.listener, session.principal());
    Ok(stream)
}

async fn read_frames(
    shard: Rc<Shard>,
    mut stream: SharedStream,
    tx: glommio::channels::local_channel::LocalSender<Next>,
    session: Rc<Session>,
) {
    let peer = session.peer.clone();
    let budget = Rc::new(glommio::sync::Semaphore::new(shard.settings.max_inflight_bytes_per_connection as u64));
    let mut sasl = SaslExchange::new();
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            break; // closed by the client
        }
        // The request's clock starts here (see `metrics::stages`).
        let trace = Rc::new(RequestTrace::start(Instant::now()));
        let size = i32::from_be_bytes(len);
        // After a v0 SaslHandshake a raw SASL token (no header) comes next.
        let frame_min = if sasl.expects_raw_token() { 0 } else { FRAME_BYTES_MIN };
        if session.protocol.needs_sasl()
            && !sasl.is_authenticated()
            && size as usize > authenticate::UNAUTHENTICATED_FRAME_BYTES_MAX
        {
            let max = authenticate::UNAUTHENTICATED_FRAME_BYTES_MAX;
            authenticate::failure_log(&shard, &peer, &format!("request size {size} over {max} before authentication"));
            break;
        }
        if size < frame_min as i32 || size as usize > shard.settings.max_request_bytes {
            let reason =
                format!("request size {size} outside [{FRAME_BYTES_MIN}, {}]", shard.settings.max_request_bytes);
            let _ = tx.send(Next::Close(reason)).await;
            break;
        }
        // Hold the request's bytes against the budgets before reading it:
        // when they are spent, this connection waits (its TCP window fills).
        let connection_budget = shard.settings.max_inflight_bytes_per_connection as u64;
        let shard_budget = shard.settings.max_inflight_bytes_per_shard as u64;
        let Ok(own) = budget.acquire_static_permit((size as u64).min(connection_budget)).await else { break };
        let Ok(shared) = shard.inflight_bytes.acquire_static_permit((size as u64).min(shard_budget)).await else {
            break;
        };
        let mut frame = BytesMut::zeroed(size as usize);
        if let Err(e) = stream.read_exact(&mut frame).await {
            log::debug!("connection from {peer}: closed mid-request: {e}");
            break;
        }
        let frame = frame.freeze();
        if let Gate::Answer { response, close } = authenticate::gate(&shard, &session, &mut sasl, &frame).await {
            if let Some(response) = response {
                let task = glommio::spawn_local(async move { Ok(Some(vec![Chunk::Memory(response)])) }).detach();
                let pending = Pending { task, api_key: ApiKey::SaslAuthenticate as i16, trace };
                if tx.send(Next::Response(pending, [own, shared])).await.is_err() {
                    break;
                }
            }
            if close {
                // As Kafka's `connection.failed.authentication.delay.ms`:
                // the client reads the answer before the close, and a
                // guesser waits before its next try.
                glommio::timer::sleep(authenticate::CLOSE_DELAY).await;
                break; // the writer ends after the answer already queued
            }
            continue;
        }
        let (shard, session, traced) = (shard.clone(), session.clone(), trace.clone());
        let (key, version) = (i16::from_be_bytes([frame[0], frame[1]]), i16::from_be_bytes([frame[2], frame[3]]));
        let task = glommio::spawn_local(async move {
            traced.lap(Stage::ReadWait);
            shard.inflight.set(shard.inflight.get() + 1);
            let started = Instant::now();
            let result = handle_frame(&shard, frame, &session, &traced).await;
            if result.is_ok() {
                shard.metrics.request(key, version, started.elapsed().as_secs_f64());
            }
            shard.inflight.set(shard.inflight.get() - 1);
            result
        })
        .detach();
        let pending = Pending { task, api_key: key, trace };
        if tx.send(Next::Response(pending, [own, shared])).await.is_err() {
            break; // the writer stopped
        }
    }
    // Dropping `tx` ends the writer after the responses already queued.
}

/// Decodes and answers one request: the response frame as chunks to write
/// in order. `Ok(None)`: no response is due (acks=0).
async fn handle_frame(
    shard: &Rc<Shard>,
    frame: Bytes,
    session: &Session,
    trace: &RequestTrace,
) -> Result<Option<Vec<Chunk>>, String> {
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    if i16::from_be_bytes([frame[0], frame[1]]) == ApiKey::Fetch as i16 && handlers::supported(ApiKey::Fetch, version) {
        let mut body = frame;
        let header_version = ApiKey::Fetch.request_header_version(version);
        RequestHeader::decode(&mut body, header_version).map_err(|e| format!("bad Fetch header: {e}"))?;
        let Request::Fetch(req) = decode_body(ApiKey::Fetch, version, &mut body)? else {
            return Err("Fetch decoded as another request".into());
        };
        trace.lap(Stage::Decode);
        let answer = authz::topics::fetch(shard, session, req, version).await;
        trace.lap(Stage::Handle);
        let encoded = crate::server::fetch_encode::encode(correlation_id, version, &answer);
        trace.lap(Stage::Encode);
        return Ok(Some(encoded));
    }
    Ok(handle_other(shard, frame, session, trace).await?.map(|b| vec![Chunk::Memory(b)]))
}

/// Every API but Fetch: encoded by the protocol crate into one buffer.
async fn handle_other(
    shard: &Rc<Shard>,
    mut frame: Bytes,
    session: &Session,
    trace: &RequestTrace,
) -> Result<Option<Bytes>, String> {
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let key = ApiKey::try_from(api_key).map_err(|_| format!("unknown API key {api_key}"))?;
    if key == ApiKey::ApiVersions && !handlers::supported(key, version) {
        let response = frame_response(correlation_id, 0, &api_versions::unsupported(), 0);
        return Ok(Some(response.map_err(|e| unencodable(key, 0, e))?));
    }
    if key == ApiKey::Produce && (0..=2).contains(&version) {
        let body = skip_header_v1(&frame)?;
        let response = handlers::produce::unsupported_old_version(body, version)?;
        return Ok(Some(frame_raw(correlation_id, &response)));
    }
    if !handlers::supported(key, version) {
        return Err(format!("{key:?} version {version} is not supported"));
    }
    let header_version = key.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version).map_err(|e| format!("bad {key:?} header: {e}"))?;
    let response_header_version = if key == ApiKey::ApiVersions { 0 } else { key.response_header_version(version) };
    if key == ApiKey::ApiVersions {
        // The body (client software name) is informational; a v3 body we
        // cannot read (or whose lengths overrun it) still gets an answer.
        if claimed_counts::check(key, version, &frame).is_ok() {
            let _ = ApiVersionsRequest::decode(&mut frame, version);
        }
        let response = frame_response(header.correlation_id, version, &api_versions::respond(0), 0);
        return Ok(Some(response.map_err(|e| unencodable(key, version, e))?));
    }
    let request = decode_body(key, version, &mut frame)?;
    // Release the frame's hold on the buffer produced records point into.
    drop(frame);
    trace.lap(Stage::Decode);
    // Produce charges its own handler time (along its critical path); every
    // other API's handler is one `Handle` lap.
    macro_rules! respond {
        ($resp:expr) => {{
            let response = $resp;
            if key != ApiKey::Produce {
                trace.lap(Stage::Handle);
            }
            let encoded = frame_response(header.correlation_id, version, &response, response_header_version)
                .map_err(|e| unencodable(key, version, e))?;
            trace.lap(Stage::Encode);
            encoded
        }};
    }
    let out = match request {
        Request::Metadata(req) => respond!(authz::topics::metadata(shard, session, req, version).await),
        Request::CreateTopics(req) => respond!(authz::topics::create_topics(shard, session, req).await),
        Request::DeleteTopics(req) => respond!(authz::topics::delete_topics(shard, session, req).await),
        Request::CreatePartitions(req) => respond!(authz::topics::create_partitions(shard, session, req).await),
        Request::ElectLeaders(req) => respond!(handlers::elect_leaders::handle(shard, session, req).await),
        Request::AlterReassignments(req) => {
            respond!(handlers::reassignments::alter(shard, session, req, version).await)
        }
        Request::ListReassignments(req) => respond!(handlers::reassignments::list(shard, session, req)),
        Request::DescribeConfigs(req) => respond!(authz::topics::describe_configs(shard, session, req, version)),
        Request::DeleteRecords(req) => respond!(authz::topics::delete_records(shard, session, req).await),
        Request::DescribeCluster(req) => respond!(authz::topics::describe_cluster(shard, session, req)),
        Request::OffsetForLeaderEpoch(req) => {
            respond!(authz::topics::offset_for_leader_epoch(shard, session, req).await)
        }
        Request::DescribeLogDirs(req) => respond!(authz::topics::describe_log_dirs(shard, session, req, version).await),
        Request::AlterConfigs(req) => respond!(authz::topics::alter_configs(shard, session, req).await),
        Request::IncrementalAlterConfigs(req) => {
            respond!(authz::topics::incremental_alter_configs(shard, session, req).await)
        }
        Request::Produce(req) => match authz::topics::produce(shard, session, req, trace).await {
            Some(resp) => respond!(resp),
            None => return Ok(None),
        },
        Request::ListOffsets(req) => respond!(authz::topics::list_offsets(shard, session, req, version).await),
        Request::InitProducerId(req) => respond!(authz::txn::init_producer_id(shard, session, req, version).await),
        Request::AddPartitionsToTxn(req) => {
            respond!(authz::txn::add_partitions(shard, session, req, version).await)
        }
        Request::AddOffsetsToTxn(req) => respond!(authz::txn::add_offsets(shard, session, req, version).await),
        Request::EndTxn(req) => respond!(authz::txn::end(shard, session, req, version).await),
        Request::TxnOffsetCommit(req) => respond!(authz::txn::offset_commit(shard, session, req, version).await),
        Request::DescribeTransactions(req) => respond!(authz::txn::describe(shard, session, req).await),
        Request::ListTransactions(req) => respond!(authz::txn::list(shard, session, req).await),
        Request::WriteTxnMarkers(req) => respond!(authz::txn::write_markers(shard, session, req).await),
        Request::FindCoordinator(req) => respond!(authz::groups::find_coordinator(shard, session, req, version)),
        Request::JoinGroup(req) => {
            let client_id = header.client_id.as_ref().map(|c| c.to_string()).unwrap_or_default();
            respond!(authz::groups::join(shard, session, req, version, client_id, client_host(&session.peer)).await)
        }
        Request::SyncGroup(req) => respond!(authz::groups::sync(shard, session, req).await),
        Request::Heartbeat(req) => respond!(authz::groups::heartbeat(shard, session, req).await),
        Request::LeaveGroup(req) => respond!(authz::groups::leave(shard, session, req, version).await),
        Request::OffsetCommit(req) => respond!(authz::groups::commit(shard, session, req, version).await),
        Request::OffsetFetch(req) => respond!(authz::groups::offset_fetch(shard, session, req, version).await),
        Request::DescribeGroups(req) => respond!(authz::groups::describe(shard, session, req).await),
        Request::ListGroups(req) => respond!(authz::groups::list(shard, session, req).await),
        Request::DeleteGroups(req) => respond!(authz::groups::delete(shard, session, req).await),
        Request::OffsetDelete(req) => respond!(authz::groups::offset_delete(shard, session, req).await),
        Request::CreateAcls(req) => respond!(handlers::acls::create(shard, session, req).await),
        Request::DescribeAcls(req) => respond!(handlers::acls::describe(shard, session, req)),
        Request::DeleteAcls(req) => respond!(handlers::acls::delete(shard, session, req).await),
        Request::DescribeUserScramCredentials(req) => respond!(authz::credentials::describe(shard, session, req)),
        Request::AlterUserScramCredentials(req) => respond!(authz::credentials::alter(shard, session, req).await),
        Request::SaslHandshake | Request::SaslAuthenticate => {
            return Err(format!("{key:?} is answered by the SASL gate (server::authenticate)"))
        }
        Request::Fetch(_) => return Err("Fetch is answered by handle_frame".into()),
    };
    Ok(Some(out))
}

/// A decoded request body, for every API the broker serves but ApiVersions.
enum Request {
    Metadata(MetadataRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    CreatePartitions(CreatePartitionsRequest),
    ElectLeaders(ElectLeadersRequest),
    AlterReassignments(AlterPartitionReassignmentsRequest),
    ListReassignments(ListPartitionReassignmentsRequest),
    DescribeConfigs(DescribeConfigsRequest),
    AlterConfigs(AlterConfigsRequest),
    DescribeCluster(DescribeClusterRequest),
    DeleteRecords(DeleteRecordsRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    DescribeLogDirs(DescribeLogDirsRequest),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    InitProducerId(InitProducerIdRequest),
    WriteTxnMarkers(WriteTxnMarkersRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    OffsetDelete(OffsetDeleteRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    DescribeTransactions(DescribeTransactionsRequest),
    ListTransactions(ListTransactionsRequest),
    CreateAcls(CreateAclsRequest),
    DescribeAcls(DescribeAclsRequest),
    DeleteAcls(DeleteAclsRequest),
    /// Decoded for the fuzz target only: `server::authenticate` answers
    /// the SASL requests before they get here.
    SaslHandshake,
    SaslAuthenticate,
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
    AlterUserScramCredentials(AlterUserScramCredentialsRequest),
}

/// Decodes the body after the request header: the one place that maps an
/// API key to its request type (the handlers and the fuzz target share it).
/// The body's claimed counts are bounded first: the protocol crate reserves
/// an array's claimed length before reading it (`protocol::claimed_counts`).
fn decode_body(key: ApiKey, version: i16, body: &mut Bytes) -> Result<Request, String> {
    claimed_counts::check(key, version, body).map_err(|e| decode_failed(key, version, e))?;
    macro_rules! decode {
        ($variant:ident, $ty:ty) => {
            Request::$variant(<$ty>::decode(body, version).map_err(|e| decode_failed(key, version, e))?)
        };
    }
    Ok(match key {
        ApiKey::Metadata => decode!(Metadata, MetadataRequest),
        ApiKey::CreateTopics => decode!(CreateTopics, CreateTopicsRequest),
        ApiKey::DeleteTopics => decode!(DeleteTopics, DeleteTopicsRequest),
        ApiKey::CreatePartitions => decode!(CreatePartitions, CreatePartitionsRequest),
        ApiKey::ElectLeaders => decode!(ElectLeaders, ElectLeadersRequest),
        ApiKey::AlterPartitionReassignments => decode!(AlterReassignments, AlterPartitionReassignmentsRequest),
        ApiKey::ListPartitionReassignments => decode!(ListReassignments, ListPartitionReassignmentsRequest),
        ApiKey::DescribeConfigs => decode!(DescribeConfigs, DescribeConfigsRequest),
        ApiKey::AlterConfigs => decode!(AlterConfigs, AlterConfigsRequest),
        ApiKey::DescribeCluster => decode!(DescribeCluster, DescribeClusterRequest),
        ApiKey::DeleteRecords => decode!(DeleteRecords, DeleteRecordsRequest),
        ApiKey::OffsetForLeaderEpoch => decode!(OffsetForLeaderEpoch, OffsetForLeaderEpochRequest),
        ApiKey::DescribeLogDirs => decode!(DescribeLogDirs, DescribeLogDirsRequest),
        ApiKey::IncrementalAlterConfigs => decode!(IncrementalAlterConfigs, IncrementalAlterConfigsRequest),
        ApiKey::Produce => decode!(Produce, ProduceRequest),
        ApiKey::Fetch => decode!(Fetch, FetchRequest),
        ApiKey::ListOffsets => decode!(ListOffsets, ListOffsetsRequest),
        ApiKey::InitProducerId => decode!(InitProducerId, InitProducerIdRequest),
        ApiKey::WriteTxnMarkers => decode!(WriteTxnMarkers, WriteTxnMarkersRequest),
        ApiKey::FindCoordinator => decode!(FindCoordinator, FindCoordinatorRequest),
        ApiKey::JoinGroup => decode!(JoinGroup, JoinGroupRequest),
        ApiKey::SyncGroup => decode!(SyncGroup, SyncGroupRequest),
        ApiKey::Heartbeat => decode!(Heartbeat, HeartbeatRequest),
        ApiKey::LeaveGroup => decode!(LeaveGroup, LeaveGroupRequest),
        ApiKey::OffsetCommit => decode!(OffsetCommit, OffsetCommitRequest),
        ApiKey::OffsetFetch => decode!(OffsetFetch, OffsetFetchRequest),
        ApiKey::DescribeGroups => decode!(DescribeGroups, DescribeGroupsRequest),
        ApiKey::ListGroups => decode!(ListGroups, ListGroupsRequest),
        ApiKey::DeleteGroups => decode!(DeleteGroups, DeleteGroupsRequest),
        ApiKey::OffsetDelete => decode!(OffsetDelete, OffsetDeleteRequest),
        ApiKey::AddPartitionsToTxn => decode!(AddPartitionsToTxn, AddPartitionsToTxnRequest),
        ApiKey::AddOffsetsToTxn => decode!(AddOffsetsToTxn, AddOffsetsToTxnRequest),
        ApiKey::EndTxn => decode!(EndTxn, EndTxnRequest),
        ApiKey::TxnOffsetCommit => decode!(TxnOffsetCommit, TxnOffsetCommitRequest),
        ApiKey::DescribeTransactions => decode!(DescribeTransactions, DescribeTransactionsRequest),
        ApiKey::ListTransactions => decode!(ListTransactions, ListTransactionsRequest),
        ApiKey::CreateAcls => decode!(CreateAcls, CreateAclsRequest),
        ApiKey::DescribeAcls => decode!(DescribeAcls, DescribeAclsRequest),
        ApiKey::DeleteAcls => decode!(DeleteAcls, DeleteAclsRequest),
        ApiKey::SaslHandshake => {
            SaslHandshakeRequest::decode(body, version).map_err(|e| decode_failed(key, version, e))?;
            Request::SaslHandshake
        }
        ApiKey::SaslAuthenticate => {
            SaslAuthenticateRequest::decode(body, version).map_err(|e| decode_failed(key, version, e))?;
            Request::SaslAuthenticate
        }
        ApiKey::DescribeUserScramCredentials => {
            decode!(DescribeUserScramCredentials, DescribeUserScramCredentialsRequest)
        }
        ApiKey::AlterUserScramCredentials => decode!(AlterUserScramCredentials, AlterUserScramCredentialsRequest),
        other => return Err(format!("{other:?} is not served")),
    })
}

/// Decodes one request frame (after its size prefix) the way the broker
/// does, without handling it: header, body, and for Produce the record
/// batches' framing and checks. For fuzzing; any problem is an `Err`.
pub fn decode_request(mut frame: Bytes) -> Result<(ApiKey, i16), String> {
    if frame.len() < FRAME_BYTES_MIN {
        return Err("frame shorter than a request header".into());
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(api_key).map_err(|_| format!("unknown API key {api_key}"))?;
    if key == ApiKey::Produce && (0..=2).contains(&version) {
        let body = skip_header_v1(&frame)?;
        handlers::produce::unsupported_old_version(body, version)?;
        return Ok((key, version));
    }
    if !handlers::supported(key, version) {
        return Err(format!("{key:?} version {version} is not supported"));
    }
    RequestHeader::decode(&mut frame, key.request_header_version(version)).map_err(|e| e.to_string())?;
    if key == ApiKey::ApiVersions {
        if claimed_counts::check(key, version, &frame).is_ok() {
            let _ = ApiVersionsRequest::decode(&mut frame, version);
        }
        return Ok((key, version));
    }
    if let Request::Produce(req) = decode_body(key, version, &mut frame)? {
        for t in req.topic_data {
            for p in t.partition_data {
                for batch in handlers::produce::split_batches(p.records.unwrap_or_default())? {
                    crate::protocol::record_batch::check_produced_batch(&batch, limits::BATCH_BYTES_MAX)
                        .map_err(|e| e.to_string())?;
                    crate::protocol::record_batch::read_records(&batch)?;
                }
            }
        }
    }
    Ok((key, version))
}

/// Kafka's form of a member's host: "/" and the peer's IP.
fn client_host(peer: &str) -> String {
    let ip = peer.parse::<std::net::SocketAddr>().map_or_else(|_| peer.to_string(), |a| a.ip().to_string());
    format!("/{ip}")
}

/// A response the protocol crate refuses to encode is a broker bug (a field
/// set outside its version range; `tests/version_matrix.rs` exists to catch
/// it), so it is logged as an error naming the API and version; the
/// connection then closes, since the client would wait for it forever.
fn unencodable(key: ApiKey, version: i16, e: String) -> String {
    log::error!("{key:?} v{version} response cannot be encoded: {e}");
    format!("{key:?} v{version} response cannot be encoded: {e}")
}

fn decode_failed(key: ApiKey, version: i16, e: impl std::fmt::Display) -> String {
    format!("cannot decode {key:?} v{version}: {e}")
}

/// Skips a v1 request header (api key, version, correlation id, client id).
fn skip_header_v1(frame: &[u8]) -> Result<&[u8], String> {
    let mut rest = &frame[FRAME_BYTES_MIN..];
    if rest.len() < 2 {
        return Err("truncated request header".into());
    }
    let client_id_len = rest.get_i16().max(0) as usize;
    if rest.len() < client_id_len {
        return Err("truncated client id".into());
    }
    Ok(&rest[client_id_len..])
}

/// Size prefix + response header + encoded body.
pub(super) fn frame_response<R: Encodable>(
    correlation_id: i32,
    version: i16,
    body: &R,
    header_version: i16,
) -> Result<Bytes, String> {
    let body_len = body.compute_size(version).map_err(|e| format!("cannot size response: {e}"))?;
    let header_len = if header_version >= 1 { 5 } else { 4 };
    let mut out = BytesMut::with_capacity(4 + header_len + body_len);
    out.put_i32((header_len + body_len) as i32);
    out.put_i32(correlation_id);
    if header_version >= 1 {
        out.put_u8(0); // no tagged fields
    }
    body.encode(&mut out, version).map_err(|e| format!("cannot encode response: {e}"))?;
    Ok(out.freeze())
}

/// Size prefix + v0 response header + a hand-encoded body.
fn frame_raw(correlation_id: i32, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(8 + body.len());
    out.put_i32((4 + body.len()) as i32);
    out.put_i32(correlation_id);
    out.put_slice(body);
    out.freeze()
}
