// kafkajs 2.2.4's admin client against shardlog, for tests/client_kafkajs.rs.
//
// usage: node admin.js BROKER TOPIC
//
// Creates TOPIC (2 partitions, compression.type=lz4), writes 10 records to
// each partition with a kafkajs producer, then asks the admin APIs tools and
// UIs use: describeCluster, createPartitions, describeConfigs, alterConfigs,
// fetchTopicOffsets, deleteTopicRecords. Prints "admin ok" and exits 0 when
// every answer is what Kafka gives; otherwise prints the difference and
// exits 1.
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');

const [broker, topic] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'shardlog-kafkajs-admin', brokers: [broker], logLevel: logLevel.ERROR });

function check(cond, what) {
  if (!cond) {
    process.stderr.write(`FAILED: ${what}\n`);
    process.exit(1);
  }
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: 2, configEntries: [{ name: 'compression.type', value: 'lz4' }] }],
  });
  check(created, 'topic created');

  const producer = kafka.producer();
  await producer.connect();
  for (const partition of [0, 1]) {
    const messages = [...Array(10).keys()].map((i) => ({ value: `p${partition}-${i}`, partition }));
    await producer.send({ topic, messages });
  }
  await producer.disconnect();

  const cluster = await admin.describeCluster();
  check(cluster.brokers.length === 1 && cluster.controller === 0, `cluster: ${JSON.stringify(cluster)}`);

  await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] });
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  check(meta.topics[0].partitions.length === 3, `3 partitions: ${JSON.stringify(meta.topics[0].partitions)}`);

  const resource = { type: ConfigResourceTypes.TOPIC, name: topic };
  const described = await admin.describeConfigs({ resources: [resource], includeSynonyms: false });
  const entries = described.resources[0].configEntries;
  const value = (name) => (entries.find((e) => e.configName === name) || {}).configValue;
  check(value('compression.type') === 'lz4', `compression.type: ${value('compression.type')}`);
  check(entries.length >= 30, `${entries.length} configs described`);

  await admin.alterConfigs({
    validateOnly: false,
    resources: [{ ...resource, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
  });
  const after = await admin.describeConfigs({ resources: [{ ...resource, configNames: ['retention.ms'] }] });
  const retention = after.resources[0].configEntries[0];
  check(retention && retention.configValue === '3600000', `retention.ms after alterConfigs: ${JSON.stringify(retention)}`);

  const offsets = await admin.fetchTopicOffsets(topic);
  const high = Object.fromEntries(offsets.map((o) => [o.partition, o.high]));
  check(high[0] === '10' && high[1] === '10' && high[2] === '0', `high watermarks: ${JSON.stringify(offsets)}`);

  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '4' }] });
  const trimmed = await admin.fetchTopicOffsets(topic);
  const low = trimmed.find((o) => o.partition === 0).low;
  check(low === '4', `low watermark after deleteTopicRecords: ${low}`);

  await admin.disconnect();
  process.stdout.write('admin ok\n');
}

main().catch((e) => {
  process.stderr.write(`FAILED: ${e.stack || e}\n`);
  process.exit(1);
});
