// A kafkajs 2.2.4 reader for tests/txn_kafkajs.rs.
//
// usage: node read.js BROKER TOPIC GROUP committed|uncommitted COUNT TIMEOUT_MS
//
// Reads TOPIC from the beginning as a member of GROUP, with
// readUncommitted false (read_committed) or true, and prints
//   record <partition> <offset> <value>
// per record. After COUNT records it waits one more second (so a record too
// many would show) and exits 0; after TIMEOUT_MS with fewer it exits 2.
const { Kafka, logLevel } = require('kafkajs');

const [broker, topic, group, isolation, countArg, timeoutArg] = process.argv.slice(2);
const count = Number(countArg);

const kafka = new Kafka({ clientId: 'shardlog-kafkajs-read', brokers: [broker], logLevel: logLevel.ERROR });
const consumer = kafka.consumer({
  groupId: group,
  sessionTimeout: 10000,
  rebalanceTimeout: 10000,
  readUncommitted: isolation === 'uncommitted',
});

let seen = 0;

async function finish(code) {
  try {
    await consumer.disconnect();
  } catch (e) {
    process.stderr.write(`disconnect failed: ${e}\n`);
  }
  process.exit(code);
}

async function main() {
  const timer = setTimeout(() => {
    process.stderr.write(`timed out with ${seen} of ${count} records\n`);
    finish(2);
  }, Number(timeoutArg));
  consumer.on(consumer.events.CRASH, (e) => process.stderr.write(`crash: ${e.payload.error}\n`));
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      process.stdout.write(`record ${partition} ${message.offset} ${message.value.toString()}\n`);
      seen += 1;
      if (seen === count) {
        clearTimeout(timer);
        setTimeout(() => finish(0), 1000);
      }
    },
  });
}

main().catch((e) => {
  process.stderr.write(`error: ${e.stack || e}\n`);
  process.exit(1);
});
