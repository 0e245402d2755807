// kafkajs 2.2.4 over an SSL listener, for tests/tls.rs.
//
// usage: node tls.js BROKER TOPIC COUNT CA_FILE TIMEOUT_MS
//
// Sends COUNT records (acks=all) and prints `produced <value>` for each
// acknowledged one, then reads TOPIC from the beginning in a fresh group
// and prints `consumed <value>`; exits 0 after COUNT, 2 at TIMEOUT_MS.
const fs = require('fs');
const crypto = require('crypto');
const { Kafka, logLevel } = require('kafkajs');

const [broker, topic, countArg, caFile, timeoutArg] = process.argv.slice(2);
const count = Number(countArg);
const run = crypto.randomBytes(4).toString('hex');

const kafka = new Kafka({
  clientId: 'shardlog-kafkajs-tls',
  brokers: [broker],
  ssl: { ca: [fs.readFileSync(caFile, 'utf-8')] },
  logLevel: logLevel.ERROR,
});

async function main() {
  setTimeout(() => {
    process.stderr.write('timed out\n');
    process.exit(2);
  }, Number(timeoutArg));
  const producer = kafka.producer();
  await producer.connect();
  for (let i = 0; i < count; i += 100) {
    const messages = [];
    for (let j = i; j < Math.min(i + 100, count); j += 1) messages.push({ value: `js-${run}-${j}` });
    await producer.send({ topic, acks: -1, messages });
    for (const m of messages) process.stdout.write(`produced ${m.value}\n`);
  }
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `tls-${run}`, sessionTimeout: 10000, rebalanceTimeout: 10000 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  let seen = 0;
  await consumer.run({
    eachMessage: async ({ message }) => {
      process.stdout.write(`consumed ${message.value.toString()}\n`);
      seen += 1;
      if (seen === count) {
        // Not awaited here: disconnect waits for this handler to return.
        setTimeout(() => consumer.disconnect().catch(() => {}).then(() => process.exit(0)), 0);
      }
    },
  });
}

main().catch((e) => {
  process.stderr.write(`error: ${e.stack || e}\n`);
  process.exit(1);
});
