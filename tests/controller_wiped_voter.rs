//! A voter that lost its directory must not help elect a leader lacking
//! what the quorum committed (Raft assumes no voter forgets; Kafka's
//! KIP-853 directory ids, `controller::directory`).
//!
//! Three voters: the leader L, a voter A and a voter B. B is killed, so a
//! topic created now is committed by L and A alone. Then L and A are
//! killed, A loses its whole data directory and starts empty, and B
//! starts again: B and the empty A are a majority, but A forgot the entry
//! and B never had it. (B is killed, not paused: a paused process would
//! find the entry in its socket's buffer when it resumed.) B must not count A's vote; once L is back, L leads
//! again and the topic is still there, on all three.

mod common;

use std::time::{Duration, Instant};

use common::{
    cluster::{broker, create, metadata, start_three, wait_for_three},
    wire::Wire,
};

fn topics(b: &common::broker::Broker) -> Vec<String> {
    let told = metadata(b, None, false);
    told.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect()
}

fn wait_for_topic(b: &common::broker::Broker, topic: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let seen = topics(b);
        if seen.iter().any(|t| t == topic) || Instant::now() >= deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_emptied_voter_cannot_elect_a_leader_without_a_committed_entry() {
    let dir = common::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let leader = metadata(broker(&brokers, 1), None, false).controller_id.0;
    assert!((1..=3).contains(&leader), "no controller among the three: {leader}");
    let a = (1..=3).find(|&id| id != leader).unwrap();
    let b = (1..=3).find(|&id| id != leader && id != a).unwrap();

    let kill = |brokers: &mut Vec<(i32, common::broker::Broker)>, id: i32| {
        brokers.iter_mut().find(|(i, _)| *i == id).unwrap().1.kill();
    };
    let restart = |brokers: &mut Vec<(i32, common::broker::Broker)>, id: i32| {
        brokers.iter_mut().find(|(i, _)| *i == id).unwrap().1.restart();
    };
    kill(&mut brokers, b);
    let mut w = Wire::connect(&broker(&brokers, leader).bootstrap());
    let _ = create(&mut w, "kept", 1, 1, &[]);
    let seen = wait_for_topic(broker(&brokers, leader), "kept", Duration::from_secs(10));
    assert!(seen.iter().any(|t| t == "kept"), "the leader never applied the topic: {seen:?}");
    drop(w);

    kill(&mut brokers, leader);
    kill(&mut brokers, a);
    std::fs::remove_dir_all(dir.path().join(format!("b{a}"))).unwrap();
    restart(&mut brokers, a);
    restart(&mut brokers, b);
    // Long enough for B and the emptied A to elect B, were A's vote counted.
    std::thread::sleep(Duration::from_secs(6));
    restart(&mut brokers, leader);
    wait_for_three(&brokers);

    for (id, br) in &brokers {
        let seen = wait_for_topic(br, "kept", Duration::from_secs(20));
        assert!(seen.iter().any(|t| t == "kept"), "broker {id} lost the committed topic: it knows {seen:?}");
    }
    let mut w = Wire::connect(&broker(&brokers, b).bootstrap());
    assert_eq!(create(&mut w, "after", 1, 1, &[]).0, 0, "the quorum takes changes again");
}
