// BullMQ's W1 and W2 on the redis-server run.sh started (see there). Prints
// `bullmq w1_jobs_per_s N` and `bullmq w2_p50_us N`.
import { Queue, QueueEvents, Worker } from 'bullmq';

const [socket, jobsArg] = process.argv.slice(2);
const connection = { path: socket, maxRetriesPerRequest: null };
const jobs = Number(jobsArg);
const payload = 'x'.repeat(64);  // the bench's --payload-size default
const now = () => process.hrtime.bigint();

// W1: every job added first (addBulk, 1,000 a call), then two workers run them.
const w1 = new Queue('w1', { connection });
for (let i = 0; i < jobs; i += 1000) {
  const n = Math.min(1000, jobs - i);
  await w1.addBulk(Array.from({ length: n }, () => ({
    name: 'echo', data: { payload }, opts: { removeOnComplete: true },
  })));
}
let done = 0;
const t0 = now();
const workers = await new Promise((resolve) => {
  const ws = [0, 1].map(() => new Worker('w1', async (job) => job.data.payload,
                                         { connection, concurrency: 64 }));
  for (const w of ws) w.on('completed', () => { if (++done === jobs) resolve(ws); });
});
const seconds = Number(now() - t0) / 1e9;
await Promise.all(workers.map((w) => w.close()));
console.log(`bullmq w1_jobs_per_s ${Math.round(jobs / seconds)}`);

// W2: one job at a time, added and awaited. Each job is kept once complete (500 hashes):
// with removeOnComplete, waitUntilFinished's own check raced the removal and threw "Missing
// key for job bull:w2:N. isFinished" (two runs of two on 2026-12-07, load ~8).
const w2 = new Queue('w2', { connection });
const events = new QueueEvents('w2', { connection });
await events.waitUntilReady();
const worker = new Worker('w2', async (job) => job.data.payload, { connection });
const rounds = [];
for (let i = 0; i < 500; ++i) {
  const start = now();
  const job = await w2.add('echo', { payload });
  await job.waitUntilFinished(events);
  rounds.push(Number(now() - start) / 1e3);
}
rounds.sort((a, b) => a - b);
console.log(`bullmq w2_p50_us ${Math.round(rounds[rounds.length >> 1])}`);
await Promise.all([worker.close(), events.close(), w1.close(), w2.close()]);
process.exit(0);
