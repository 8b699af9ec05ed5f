// Runs every exported model with ONNX Runtime (onnxruntime-node from npm) on the inputs the C++
// test wrote and compares each output with tracegraph's result:
//   |ort - tracegraph| <= 1e-5 * max(|tracegraph|, scale), scale = the largest |value| of that
// output (relative, with the output's own scale as the floor for elements near zero); integer
// and bool outputs must be equal. Exits 1 on any mismatch or missing file.
//
//   node run_onnxruntime.mjs NPM_DIR CASES_DIR
// NPM_DIR holds node_modules/onnxruntime-node (./tg test installs it there with
// `npm install --ignore-scripts onnxruntime-node@1.30.0`).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [npmDir, casesDir] = process.argv.slice(2);
if (!npmDir || !casesDir) {
  console.error('usage: node run_onnxruntime.mjs NPM_DIR CASES_DIR');
  process.exit(2);
}
let ort;
try {
  ort = createRequire(path.join(path.resolve(npmDir), 'package.json'))('onnxruntime-node');
} catch (e) {
  console.error(`onnxruntime-node is not installed in ${npmDir} (${e.message}).\n` +
                `Install it with ./tg test, or: npm install --ignore-scripts --prefix ${npmDir} onnxruntime-node@1.30.0`);
  process.exit(1);
}

// .npy (format 1.0/2.0, little-endian, C order) -> { dtype, dims, data }
const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i4': ['int32', Int32Array],
  '<i8': ['int64', BigInt64Array], '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array],
};
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const type = NPY_TYPES[descr];
  if (!type) throw new Error(`${file}: dtype ${descr} is not handled`);
  const bytes = buf.subarray(start);
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return { dtype: type[0], dims, data: new type[1](copy.buffer) };
}

function compare(name, got, want) {
  const gd = Array.from(got.dims).map(Number), wd = want.dims;
  if (gd.length !== wd.length || gd.some((d, i) => d !== wd[i])) return `${name}: shape [${gd}] != [${wd}]`;
  if (got.type !== want.dtype) return `${name}: dtype ${got.type} != ${want.dtype}`;
  const n = want.data.length;
  if (want.dtype === 'float32' || want.dtype === 'float64') {
    let scale = 0;
    for (let i = 0; i < n; ++i) scale = Math.max(scale, Math.abs(want.data[i]));
    let worst = 0, at = -1;
    for (let i = 0; i < n; ++i) {
      const w = want.data[i], g = got.data[i];
      if (Number.isNaN(w) !== Number.isNaN(g)) return `${name}[${i}]: ${g} vs ${w}`;
      if (Number.isNaN(w)) continue;
      const err = Math.abs(g - w) / Math.max(Math.abs(w), scale, 1e-30);
      if (err > worst) { worst = err; at = i; }
    }
    if (worst > 1e-5) return `${name}: relative error ${worst.toExponential(2)} at element ${at} (onnxruntime ${got.data[at]}, tracegraph ${want.data[at]})`;
    return null;
  }
  for (let i = 0; i < n; ++i)
    if (BigInt(got.data[i]) !== BigInt(want.data[i])) return `${name}[${i}]: ${got.data[i]} vs ${want.data[i]}`;
  return null;
}

const files = fs.readdirSync(casesDir);
const runs = new Map();  // "<case>.r<k>" -> { model, inputs: {name: file}, outputs: {name: file} }
for (const f of files) {
  const m = /^(.+)\.(r\d+)\.(in|out)\.(.+)\.npy$/.exec(f);
  if (!m) continue;
  const key = `${m[1]}.${m[2]}`;
  if (!runs.has(key)) runs.set(key, { model: path.join(casesDir, `${m[1]}.onnx`), inputs: {}, outputs: {} });
  // value names are percent-encoded in file names ('/' as %2F: a Variable's input "dense/kernel")
  runs.get(key)[m[3] === 'in' ? 'inputs' : 'outputs'][decodeURIComponent(m[4])] = path.join(casesDir, f);
}
if (runs.size === 0) {
  console.error(`no cases in ${casesDir}: run tg_onnx_tests with TG_ONNX_CASES_DIR=${casesDir} first`);
  process.exit(1);
}

let failures = 0;
for (const [key, run] of [...runs].sort()) {
  try {
    const session = await ort.InferenceSession.create(run.model);
    const feeds = {};
    for (const [name, file] of Object.entries(run.inputs)) {
      const t = readNpy(file);
      feeds[name] = new ort.Tensor(t.dtype, t.data, t.dims);
    }
    const missing = session.inputNames.filter((n) => !(n in feeds));
    if (missing.length) throw new Error(`no .npy for inputs ${missing}`);
    const results = await session.run(feeds);
    const problems = [];
    for (const [name, file] of Object.entries(run.outputs)) {
      if (!(name in results)) { problems.push(`${name}: not an output of the model`); continue; }
      const p = compare(name, results[name], readNpy(file));
      if (p) problems.push(p);
    }
    if (Object.keys(run.outputs).length !== session.outputNames.length)
      problems.push(`the model has ${session.outputNames.length} outputs, tracegraph gave ${Object.keys(run.outputs).length}`);
    if (problems.length) {
      ++failures;
      console.log(`FAIL ${key}:\n  ${problems.join('\n  ')}`);
    } else {
      console.log(`ok ${key}: ${Object.keys(run.outputs).length} outputs match (batch dims ${Object.values(feeds).map((t) => t.dims[0])})`);
    }
  } catch (e) {
    ++failures;
    console.log(`FAIL ${key}: ${e.message}`);
  }
}
if (failures) {
  console.log(`${failures} of ${runs.size} runs failed`);
  process.exit(1);
}
