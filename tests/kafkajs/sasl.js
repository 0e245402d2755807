// kafkajs 2.2.4 over SASL_PLAINTEXT, for tests/sasl.rs.
//
// usage: node sasl.js roundtrip BROKER MECHANISM USER PASSWORD TOPIC VALUES_JSON
//        node sasl.js login BROKER MECHANISM USER PASSWORD
//
// roundtrip produces VALUES (a JSON list of strings) to partition 0 of TOPIC,
// then reads the partition from the start with a consumer group, and prints
// {"offsets": [...], "consumed": [...]}. login connects an admin client and
// lists topics, printing {"ok": true} or {"ok": false, "error", "kind"}.
// MECHANISM is Kafka's name (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). With
// SHARDLOG_SASL_SSL_CA set (a CA file) it speaks SASL_SSL, trusting that CA.
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const sslCa = process.env.SHARDLOG_SASL_SSL_CA;

const [cmd, broker, mechanism, username, password, topic, valuesJson] = process.argv.slice(2);

const kafka = new Kafka({
  clientId: 'shardlog-kafkajs-sasl',
  brokers: [broker],
  logLevel: logLevel.NOTHING,
  sasl: { mechanism: mechanism.toLowerCase(), username, password },
  ssl: sslCa ? { ca: [fs.readFileSync(sslCa, 'utf-8')] } : false,
  retry: { retries: 2 },
});

async function roundtrip() {
  const values = JSON.parse(valuesJson);
  const producer = kafka.producer();
  await producer.connect();
  const offsets = [];
  for (const v of values) {
    const [meta] = await producer.send({ topic, messages: [{ value: v, partition: 0 }] });
    offsets.push(Number(meta.baseOffset));
  }
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `js-${topic}`, sessionTimeout: 10000, rebalanceTimeout: 10000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const consumed = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${consumed.length} records in 30 s`)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        consumed.push(message.value.toString());
        if (consumed.length >= values.length) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  return { offsets, consumed };
}

async function login() {
  const admin = kafka.admin();
  try {
    await admin.connect();
    await admin.listTopics();
    await admin.disconnect();
    return { ok: true };
  } catch (e) {
    return { ok: false, error: String(e.message), kind: e.name };
  }
}

(cmd === 'roundtrip' ? roundtrip() : login()).then(
  (out) => {
    process.stdout.write(`${JSON.stringify(out)}\n`);
    process.exit(0);
  },
  (e) => {
    process.stderr.write(`${e.stack || e}\n`);
    process.exit(1);
  },
);
