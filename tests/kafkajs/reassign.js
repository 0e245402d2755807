// kafkajs 2.2.4's partition reassignment admin calls against shardlog, for
// tests/cluster_reassignment.rs.
//
// usage: node reassign.js BROKER alter TOPIC PARTITION REPLICAS
//        node reassign.js BROKER list
//
// `alter` asks AlterPartitionReassignments to move TOPIC's PARTITION to
// REPLICAS (comma-separated broker ids, the preferred leader first) and
// prints "alter ok". `list` prints ListPartitionReassignments' answer for
// every partition as one JSON line. Any error is printed and exits 1.
const { Kafka, logLevel } = require('kafkajs');

const [broker, command, topic, partition, replicas] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'shardlog-kafkajs-reassign', brokers: [broker], logLevel: logLevel.ERROR });

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  if (command === 'alter') {
    await admin.alterPartitionReassignments({
      topics: [{
        topic,
        partitionAssignment: [{ partition: Number(partition), replicas: replicas.split(',').map(Number) }],
      }],
      timeout: 10000,
    });
    console.log('alter ok');
  } else if (command === 'list') {
    const listed = await admin.listPartitionReassignments({ timeout: 10000 });
    console.log(JSON.stringify(listed));
  } else {
    throw new Error(`unknown command ${command}`);
  }
  await admin.disconnect();
}

main().catch((e) => {
  process.stderr.write(`FAILED: ${e.stack || e}\n`);
  process.exit(1);
});
