// The piscina peer of sandpool-bench's W1 and W2 (issue 37): the equivalent of steering's
// `PISCINA_CTPW=16 node bench.mjs piscina w1 200000`.
//   W1: N echo tasks of a 64-byte payload through 2 worker threads, 16 concurrent tasks per
//       worker (PISCINA_CTPW), all submitted at once; tasks/s from first submit to last result.
//   W2: one task at a time, round-trip p50/p99 in us.
// Prints `piscina METRIC VALUE UNIT` lines, sandpool-bench's format.
// Usage: node piscina.mjs [w1_tasks] [w2_rounds]
import {Piscina} from 'piscina';

const w1Tasks = Number(process.argv[2] ?? 200000);
const w2Rounds = Number(process.argv[3] ?? 20000);
const workers = Number(process.env.PISCINA_WORKERS ?? 2);
const ctpw = Number(process.env.PISCINA_CTPW ?? 16);
const payloadSize = Number(process.env.PISCINA_PAYLOAD ?? 64);

const pool = new Piscina({
  filename: new URL('./worker.mjs', import.meta.url).href,
  minThreads: workers,
  maxThreads: workers,
  concurrentTasksPerWorker: ctpw,
  idleTimeout: 60000,
});

// Payloads differ per task and every reply is checked, like sandpool-bench's W1 and W2.
const payloads = [];
for (let i = 0; i < 1024; ++i) {
  payloads.push(String(i).padStart(8, '0') + 'x'.repeat(Math.max(0, payloadSize - 8)));
}
let bad = 0;
const check = (got, i) => {
  if (got !== payloads[i % payloads.length]) ++bad;
};

// W1: workers * ctpw * 2 tasks kept in flight until n have run (a submitter that keeps every
// worker's 16 slots full with as many queued behind them). Submitting all n at once is
// slower in piscina (measured: 11 k against 20 k tasks/s on the same loaded host), so this
// is the kinder setting for the peer.
async function w1(n) {
  const window = workers * ctpw * 2;
  let next = 0;
  const t0 = process.hrtime.bigint();
  async function lane() {
    while (next < n) {
      const i = next++;
      check(await pool.run(payloads[i % payloads.length]), i);
    }
  }
  await Promise.all(Array.from({length: window}, lane));
  const t1 = process.hrtime.bigint();
  return n / (Number(t1 - t0) / 1e9);
}

async function w2(rounds) {
  const samples = [];
  for (let i = 0; i < rounds; ++i) {
    const t0 = process.hrtime.bigint();
    check(await pool.run(payloads[i % payloads.length]), i);
    samples.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  samples.sort((a, b) => a - b);
  return {p50: samples[Math.floor(samples.length / 2)],
          p99: samples[Math.floor(samples.length * 0.99)]};
}

await w1(Math.min(20000, w1Tasks));  // warm-up: threads started, code compiled
const tps = await w1(w1Tasks);
await w2(1000);
const lat = await w2(w2Rounds);
await pool.destroy();
if (bad !== 0) {
  console.error(`piscina: ${bad} replies were not their task's payload`);
  process.exit(1);
}
console.log(`piscina W1_throughput ${Math.round(tps)} tasks/s`);
console.log(`piscina W1_tasks ${w1Tasks} tasks`);
console.log(`piscina W1_workers ${workers} workers`);
console.log(`piscina W1_concurrent_tasks_per_worker ${ctpw} tasks/worker`);
console.log(`piscina W2_p50 ${lat.p50.toFixed(1)} us`);
console.log(`piscina W2_p99 ${lat.p99.toFixed(1)} us`);
