#!/usr/bin/env bash
# bench-sale.sh [FLAG...]
#
# Measures a purchase of one hot product in one go on this machine, against
# a real MariaDB and three redis-server nodes (scripts/testenv.sh makes them
# available): the two anchors (MariaDB alone: a serial purchase transaction
# on one connection, the same on 64), the service over HTTP under the bundled
# driver (each safe strategy, reserve among them; redlock with batch=1 and
# the default batch;
# the default batch on two instances, and at 256 buyers on one and two), a
# flash sale over two instances, sold-out answers against GET /healthz, and
# a catalogue of 10,000 products with Zipf(1.1) demand (then the instance's
# RSS and the size of its /metrics), and reserve beside the recipe teams
# copy (cmd/peer), and the hot product under buyers' tokens per algorithm.
# Prints one table and the ratios the project aims for. FLAGs go to
# cmd/salebench (-duration, -concurrency); -cluster measures instead reserve
# on one Redis node against a Redis Cluster it starts (three masters with a
# replica each, on this machine): the catalogue, one hot product, the price
# of SECKILL_RESERVE_ACKS, and reserve.lua alone; -jwt measures only the hot
# product under open and under buyers' tokens (RS256, ES256, EdDSA).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/seckill-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/seckill" .
go build -o "$work/salebench" ./cmd/salebench
go build -o "$work/peer" ./cmd/peer
scripts/testenv.sh "$work/salebench" -service "$work/seckill" -peer "$work/peer" "$@"
