#!/bin/bash
# $1 bench binary, $2 rate, $3 name ; broker: /tmp/old-shardlog (same broker code in both)
rm -rf /tmp/t1/d
/tmp/old-shardlog serve --config /tmp/t1/b.toml --data-dir /tmp/t1/d --cores 1 --cpuset 0 --metrics-listen 127.0.0.1:19393 --listen 127.0.0.1:19192 > /tmp/t1/broker.log 2>&1 &
B=$!
sleep 2
taskset -c 1 $1 bench produce --bootstrap 127.0.0.1:19192 --topic tb --partitions 16 --record-size 1024 --acks all --duration 10s --warmup 2s --cores 1 --client rdkafka --transactional --txn-interval 100ms --rate $2 --output /tmp/t1 --name $3 2>&1 | tr '\r' '\n' | grep "transactions / none"
kill $B; wait $B
