// A kafkajs 2.2.4 transactional producer for tests/txn_kafkajs.rs.
//
// usage: node txn.js BROKER TOPIC INPUT_TOPIC GROUP TXN_ID
//
// Runs six transactions on TOPIC with a transactional producer
// (transactionalId TXN_ID, idempotent, one request in flight): rounds 1
// and 4 are aborted, the others committed. Round 2 also commits GROUP's
// offset of INPUT_TOPIC partition 0 at 5 through sendOffsets (inside the
// transaction); round 4, aborted, tries to move it to 9. Each record is
// printed as it was sent, with the transaction's outcome:
//   committed <partition> <value>
//   aborted <partition> <value>
// and "done" at the end; it exits 1 on any error.
const { Kafka, logLevel } = require('kafkajs');

const [broker, topic, input, group, txnId] = process.argv.slice(2);
const ROUNDS = 6;
const PER_ROUND = 4;

const kafka = new Kafka({
  clientId: 'shardlog-kafkajs-txn',
  brokers: [broker],
  logLevel: logLevel.ERROR,
  retry: { retries: 5 },
});
const producer = kafka.producer({ transactionalId: txnId, idempotent: true, maxInFlightRequests: 1 });

async function round(r) {
  const commit = r !== 1 && r !== 4;
  const outcome = commit ? 'committed' : 'aborted';
  const txn = await producer.transaction();
  try {
    const messages = [];
    for (let i = 0; i < PER_ROUND; i += 1) {
      messages.push({ partition: i % 2, key: `k${i}`, value: `${outcome}-r${r}-${i}` });
    }
    await txn.send({ topic, messages });
    if (r === 2 || r === 4) {
      const offset = r === 2 ? '5' : '9';
      await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic: input, partitions: [{ partition: 0, offset }] }] });
    }
    if (commit) {
      await txn.commit();
    } else {
      await txn.abort();
    }
    for (const m of messages) {
      process.stdout.write(`${outcome} ${m.partition} ${m.value}\n`);
    }
  } catch (e) {
    if (txn.isActive()) {
      await txn.abort();
    }
    throw e;
  }
}

async function main() {
  await producer.connect();
  for (let r = 0; r < ROUNDS; r += 1) {
    await round(r);
  }
  await producer.disconnect();
  process.stdout.write('done\n');
}

main().catch((e) => {
  process.stderr.write(`error: ${e.stack || e}\n`);
  process.exit(1);
});
