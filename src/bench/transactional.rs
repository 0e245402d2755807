//! `shardlog bench produce --transactional --txn-interval 100ms`: what
//! transactions cost. The same workload runs twice, without transactions
//! and then with transactional producers committing every interval; a
//! read_committed reader times every record end to end in both (intended
//! send time → receipt), since a transaction's records become visible only
//! at its commit. Prints both runs and their ratio, against the targets of
//! issue 16: at least 0.8 of the throughput without transactions, and a
//! read_committed e2e p99 within the commit interval + 2 ms.
//!
//! The native generator (the default) runs one transactional producer per
//! load core (`txn_session`) and reads with its own fetchers, all on the
//! load cores' event loops; `--client rdkafka` runs librdkafka's
//! transactional producer and a librdkafka read_committed consumer.

use hdrhistogram::Histogram;
use serde_json::json;

use super::{
    cluster::Layout,
    measure::CommitPhases,
    report::{self, percentiles_json},
    BenchArgs, ClientKind, Outcome, Workload,
};

/// One run of the comparison, transactional when the workload has a
/// `txn_interval`: its outcome and commits (librdkafka's have no phases:
/// only `commit`, its commit_transaction, which flushes first).
fn run_one(w: &Workload, a: &BenchArgs, layout: &Layout, e2e: bool) -> Result<(Outcome, CommitPhases), String> {
    match a.client {
        ClientKind::Native => {
            let label = if w.txn_interval.is_some() { "transactional" } else { "plain" };
            let o = super::run_once(w, layout, e2e, label)?;
            let phases = o.produce.txn.clone();
            Ok((o, phases))
        }
        ClientKind::Rdkafka => run_rdkafka(w, a, e2e),
    }
}

#[cfg(feature = "rdkafka-client")]
fn run_rdkafka(w: &Workload, a: &BenchArgs, e2e: bool) -> Result<(Outcome, CommitPhases), String> {
    let extras = super::rdkafka::Extras { txn_interval: w.txn_interval, e2e };
    let (o, commits) = super::rdkafka::run_with(w, &a.bootstrap, extras)?;
    Ok((o, commits.unwrap_or_default()))
}

#[cfg(not(feature = "rdkafka-client"))]
fn run_rdkafka(_: &Workload, _: &BenchArgs, _: bool) -> Result<(Outcome, CommitPhases), String> {
    Err("this shardlog was built without librdkafka: rebuild with `--features rdkafka-client` for --client rdkafka"
        .into())
}

/// The two runs, their comparison and the JSON result.
pub fn compare(w: &Workload, a: &BenchArgs, layout: &Layout, name: &str) -> Result<(), String> {
    if w.acks != -1 {
        return Err("--transactional needs --acks all (a transactional producer's)".into());
    }
    let client = match a.client {
        ClientKind::Native => "native",
        ClientKind::Rdkafka => "rdkafka",
    };
    let interval = a.txn_interval;
    if interval.is_zero() {
        return Err("--txn-interval must be positive".into());
    }
    let interval_ms = interval.as_secs_f64() * 1000.0;
    // Unthrottled, a reader would take the generator's CPU and time only
    // queueing: throughput alone then.
    let e2e = w.rate > 0.0;
    if !e2e {
        eprintln!("unthrottled (--rate 0): throughput only, no read_committed e2e reader");
    }
    eprintln!("without transactions ({client}):");
    let (plain, _) = run_one(w, a, layout, e2e)?;
    plain.print();
    eprintln!("with transactions, a commit every {interval_ms} ms:");
    let mut txn_w = w.clone();
    txn_w.run = w.run.wrapping_add(1);
    txn_w.txn_interval = Some(interval);
    let (txn, stats) = run_one(&txn_w, a, layout, e2e)?;
    txn.print();
    let native = a.client == ClientKind::Native;
    let ratio = txn.throughput() / plain.throughput().max(1e-9);
    let comparison = json!({
        "throughput_txn_over_plain": ratio,
        "e2e_measured": e2e,
        "p99_ms_plain": plain.p99_ms(),
        "p99_ms_txn": txn.p99_ms(),
        "p99_is": if e2e { "read_committed e2e" } else { "produce (corrected), to acknowledgement" },
        "commits": stats.commits,
        "commit_transaction_ms": percentiles_json(&stats.commit),
        "commit_transaction_is": match a.client {
            ClientKind::Native => "commit slot → EndTxn answered (the last records' answers, then EndTxn)",
            ClientKind::Rdkafka => "librdkafka commit_transaction (its flush, then EndTxn)",
        },
        "partitions_ended": native.then_some(stats.partitions_ended),
        "commit_phases_ms": native.then(|| json!({
            "drain": percentiles_json(&stats.drain),
            "end_txn": percentiles_json(&stats.end_txn),
            "add_partitions": percentiles_json(&stats.add_partitions),
            "drain_is": "commit slot → the transaction's last record answered",
        })),
        "target_throughput_ratio_at_least": 0.8,
        "target_e2e_p99_ms_at_most": interval_ms + 2.0,
        "throughput_target_met": ratio >= 0.8,
        "e2e_target_met": e2e.then(|| txn.p99_ms() <= interval_ms + 2.0),
    });
    eprintln!(
        "transactions / none: throughput x{ratio:.2} (target ≥ 0.8), {} p99 {:.3} ms vs {:.3} ms (target ≤ {:.0} ms); {} commits, commit p50 {:.3} ms, p99 {:.3} ms",
        if e2e { "read_committed e2e" } else { "produce" },
        txn.p99_ms(),
        plain.p99_ms(),
        interval_ms + 2.0,
        stats.commits,
        report::ms(stats.commit.value_at_percentile(50.0)),
        report::ms(stats.commit.value_at_percentile(99.0)),
    );
    if native {
        let p = &stats;
        let both = |h: &Histogram<u64>| {
            format!(
                "{:.3} / {:.3} ms",
                report::ms(h.value_at_percentile(50.0)),
                report::ms(h.value_at_percentile(99.0))
            )
        };
        eprintln!(
            "commit phases, p50 / p99: last records answered {}, EndTxn {}, AddPartitionsToTxn {}",
            both(&p.drain),
            both(&p.end_txn),
            both(&p.add_partitions)
        );
    }
    let mut params = w.params(a, "produce", client);
    params["transactional"] = json!(true);
    params["txn_interval_ms"] = json!(interval_ms);
    let ok = plain.ok() && txn.ok();
    let result = json!({
        "tool": "shardlog bench",
        "status": if ok { "ok" } else { "failed" },
        "parameters": params,
        "machine": report::machine(),
        "commit": report::commit(),
        "without_transactions": plain.json(w, a, "produce", client),
        "transactional": txn.json(&txn_w, a, "produce", client),
        "comparison": comparison,
    });
    let path = a.output.join(format!("{name}.json"));
    super::write_json(&path, &result)?;
    eprintln!("results: {}", path.display());
    if ok {
        Ok(())
    } else {
        Err(format!("run failed: {}; {}", plain.verdict(), txn.verdict()))
    }
}
