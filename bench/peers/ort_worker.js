'use strict';
// The ONNX Runtime side of bench/peers/peers.py: a long-running child process that speaks the
// workers' protocol (peers.py, "Workers"): one JSON request per line on stdin, one JSON reply
// per line on stdout. It stays up for the whole bench, so node's and ORT's start-up are never
// timed, and it times each call itself (process.hrtime.bigint around `await session.run`), so
// the pipe is never timed either.
//
// ONNX Runtime is npm's onnxruntime-node (its CPU library is inside the package), installed by
// scripts/install-peers.sh. Sessions use the CPU execution provider with intra-op threads =
// the bench's thread count, one inter-op thread, sequential execution and every graph
// optimisation: ORT's settings for a fixed thread budget.
const fs = require('fs');
const readline = require('readline');
const ort = require('onnxruntime-node');

const sessions = new Map();  // key -> {session, threads, feeds}

function readF32(path) {
  const buf = fs.readFileSync(path);
  // A copy: a Buffer may start at any byte offset of its pool, a Float32Array must not.
  const copy = new ArrayBuffer(buf.byteLength);
  new Uint8Array(copy).set(buf);
  return new Float32Array(copy);
}

function entry(key) {
  const s = sessions.get(key);
  if (!s) throw new Error(`no session '${key}'`);
  return s;
}

// Median of an empty `await new Promise(setImmediate)`: what the binding's async run adds to a
// call (its native run is synchronous, wrapped in setImmediate), reported, not subtracted.
async function immediateOverheadNs() {
  const t = [];
  for (let i = 0; i < 201; ++i) {
    const t0 = process.hrtime.bigint();
    await new Promise((resolve) => setImmediate(resolve));
    t.push(Number(process.hrtime.bigint() - t0));
  }
  t.sort((a, b) => a - b);
  return t[100];
}

async function handle(msg) {
  switch (msg.op) {
    case 'info':
      return {
        runtime: 'onnxruntime-node',
        version: require('onnxruntime-node/package.json').version,
        node: process.version,
        immediate_overhead_ns: await immediateOverheadNs(),
      };
    case 'load': {
      const t0 = process.hrtime.bigint();
      const session = await ort.InferenceSession.create(msg.model, {
        executionProviders: ['cpu'],
        intraOpNumThreads: msg.threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
        logSeverityLevel: 3,
      });
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      sessions.set(msg.key, {session, threads: msg.threads, feeds: null});
      return {load_seconds: seconds};
    }
    case 'input': {
      const s = entry(msg.key);
      s.feeds = {[s.session.inputNames[0]]: new ort.Tensor('float32', readF32(msg.path), msg.shape)};
      return {};
    }
    case 'run': {
      // One call whose output is written to msg.output (raw float32) for the agreement check;
      // its time is the first call's when it is the first.
      const s = entry(msg.key);
      const t0 = process.hrtime.bigint();
      const out = await s.session.run(s.feeds);
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      const y = out[s.session.outputNames[0]];
      fs.writeFileSync(msg.output, Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
      return {seconds, shape: y.dims.map(Number)};
    }
    case 'time': {
      const s = entry(msg.key);
      for (let i = 0; i < msg.warm; ++i) await s.session.run(s.feeds);
      const times = [];
      for (let i = 0; i < msg.calls; ++i) {
        const t0 = process.hrtime.bigint();
        await s.session.run(s.feeds);
        times.push(Number(process.hrtime.bigint() - t0));
      }
      return {times_ns: times};
    }
    case 'close': {
      const s = sessions.get(msg.key);
      if (s) await s.session.release();
      sessions.delete(msg.key);
      return {};
    }
    default:
      throw new Error(`unknown op '${msg.op}'`);
  }
}

// Requests are handled one at a time, in order: the driver waits for each reply.
async function main() {
  const rl = readline.createInterface({input: process.stdin, terminal: false});
  for await (const line of rl) {
    if (!line.trim()) continue;
    let reply;
    try {
      reply = {ok: true, ...(await handle(JSON.parse(line)))};
    } catch (e) {
      reply = {ok: false, error: String(e && e.stack ? e.stack : e)};
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
}

main();
