// A kafkajs 2.2.4 group consumer for tests/client_kafkajs.rs.
//
// usage: node consume.js BROKER TOPIC GROUP beginning|end COUNT TIMEOUT_MS
//
// Joins GROUP, subscribes to TOPIC (fromBeginning for "beginning"; "end"
// starts at the log end when the group has no committed offset; a committed
// offset wins either way) and prints one line per record:
//   record <partition> <offset> <value>
// It prints "joined" once the group is joined, commits what it consumed,
// and exits 0 after COUNT records, or 2 after TIMEOUT_MS with fewer.
const { Kafka, logLevel } = require('kafkajs');

const [broker, topic, group, mode, countArg, timeoutArg] = process.argv.slice(2);
const count = Number(countArg);
const timeoutMs = Number(timeoutArg);

const kafka = new Kafka({
  clientId: 'shardlog-kafkajs-test',
  brokers: [broker],
  logLevel: logLevel.ERROR,
  retry: { retries: 3 },
});
const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, rebalanceTimeout: 10000 });

let seen = 0;
let done = false;

async function finish(code) {
  if (done) return;
  done = true;
  try {
    await consumer.disconnect();
  } catch (e) {
    process.stderr.write(`disconnect failed: ${e}\n`);
    code = code || 3;
  }
  process.exit(code);
}

async function main() {
  const timer = setTimeout(() => {
    process.stderr.write(`timed out after ${timeoutMs} ms with ${seen} of ${count} records\n`);
    finish(2);
  }, timeoutMs);
  consumer.on(consumer.events.GROUP_JOIN, () => process.stdout.write('joined\n'));
  consumer.on(consumer.events.CRASH, (e) => process.stderr.write(`crash: ${e.payload.error}\n`));
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: mode === 'beginning' });
  await consumer.run({
    autoCommit: true,
    eachMessage: async ({ partition, message }) => {
      if (done) return;
      process.stdout.write(`record ${partition} ${message.offset} ${message.value.toString()}\n`);
      seen += 1;
      if (seen >= count) {
        clearTimeout(timer);
        // Leave the commit of this last offset to disconnect().
        setImmediate(() => finish(0));
      }
    },
  });
}

main().catch((e) => {
  process.stderr.write(`failed: ${e.stack || e}\n`);
  process.exit(1);
});
