// ONNX Runtime's side of the ONNX import rows (issue 37): each model bench/onnx_models.py wrote,
// at each batch, in an InferenceSession with every graph optimisation and `threads` intra-op
// threads (one inter-op thread, sequential execution: the same work split the way tracegraph
// splits it). Prints one JSON object: {"ort_version", "threads", "results": {name: {"median_ns",
// "iterations"}}}, names as tg_bench's with "ort/" in front and "/imported" left out.
//
//   node ort_bench.mjs NPM_DIR ONNX_DIR THREADS REPETITIONS
// NPM_DIR holds node_modules/onnxruntime-node (npm install --ignore-scripts onnxruntime-node@1.30.0).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [npmDir, onnxDir, threadsArg, repsArg] = process.argv.slice(2);
if (!npmDir || !onnxDir) {
  console.error('usage: node ort_bench.mjs NPM_DIR ONNX_DIR THREADS REPETITIONS');
  process.exit(2);
}
const threads = Number(threadsArg || 1), repetitions = Number(repsArg || 5);
let ort;
try {
  ort = createRequire(path.join(path.resolve(npmDir), 'package.json'))('onnxruntime-node');
} catch (e) {
  console.error(`ort_bench.mjs: onnxruntime-node is not installed in ${npmDir} (${e.message})`);
  process.exit(3);
}

// A float32 .npy in C order (what onnx_models.py writes) as an ort.Tensor.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', start - headerLen, start);
  if (!/'descr':\s*'<f4'/.test(header)) throw new Error(`${file}: not float32`);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const copy = new Uint8Array(buf.length - start);
  copy.set(buf.subarray(start));
  return new ort.Tensor('float32', new Float32Array(copy.buffer), dims);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const results = {};
for (const model of ['resnet18', 'mobilenet_v2']) {
  const file = path.join(onnxDir, `${model}.onnx`);
  if (!fs.existsSync(file)) continue;
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  for (const batch of [1, 32]) {
    const feeds = { [session.inputNames[0]]: readNpy(path.join(onnxDir, `${model}.b${batch}.npy`)) };
    await session.run(feeds);
    await session.run(feeds);  // warm-up: allocations and the first run's planning
    const minNs = (batch === 1 ? 0.5 : 1.0) * 1e9;
    let iterations = 1;
    for (;;) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < iterations; ++i) await session.run(feeds);
      const dt = Number(process.hrtime.bigint() - t0);
      if (dt >= minNs / 4 || iterations >= 1 << 20) break;
      iterations *= 2;
    }
    const samples = [];
    for (let r = 0; r < repetitions; ++r) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < iterations; ++i) await session.run(feeds);
      samples.push(Number(process.hrtime.bigint() - t0) / iterations);
    }
    results[`ort/onnx/${model}/b${batch}`] = { median_ns: median(samples), iterations };
    console.error(`  ort/onnx/${model}/b${batch}: ${(median(samples) / 1e6).toFixed(2)} ms`);
  }
}
const version = JSON.parse(fs.readFileSync(path.join(npmDir, 'node_modules', 'onnxruntime-node', 'package.json'))).version;
console.log(JSON.stringify({ ort_version: version, threads, results }, null, 1));
