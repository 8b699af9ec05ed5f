// Export (tg::save / tg::load): a loaded function against the original traced function it was
// saved from, in the same process on the same inputs, and the cost of loading a large model file
// against the cost of mapping it.
//
//   export/<workload>/{original,loaded}: the MLP train step, the 100-op tanh chain on 16 floats
//     and the scalar a + b. The loaded side is checked to run the original's plan (the same
//     optimised graph, fusion included) before it is timed.
//   export/load/*: a function closing over one float32 Variable of TG_BENCH_LOAD_GIB GiB
//     (default 1; 0 leaves these benchmarks out), the file in the page cache: mapping it and
//     touching every page (the baseline), tg::load with and without checksums, each also
//     followed by the first call (which reads all the data), and zlib's crc32_z over the mapped
//     file alone.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/buffer.h"
#include "core/tensor_impl.h"
#include "tracegraph/export.h"
#include "tracegraph/tracegraph.h"
#include "workloads.h"

namespace {

using tg::Tensor;

std::string temp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

std::string temp_path(const std::string& name) {
  return temp_dir() + "/tg_bench_" + std::to_string(::getpid()) + "_" + name;
}

// Saves `fn` (every trace it has), loads the file back and removes it: the loaded function keeps
// its private mapping of the file, which outlives the name.
template <class F>
tg::LoadedFunction save_and_load(const tg::PolymorphicFunction<F>& fn, const std::string& name) {
  const std::string path = temp_path(name);
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove{path};
  tg::save(path, fn);
  return tg::load(path);
}

// Throws unless every concrete function of `loaded` runs the optimised graph (fusion included)
// of the original's concrete function at the same index: the rows compare one plan run by two
// dispatch paths.
template <class F>
void check_same_plan(const tg::PolymorphicFunction<F>& original, const tg::LoadedFunction& loaded) {
  const auto a = original.concrete_functions();
  const auto b = loaded.concrete_functions();
  if (a.size() != b.size())
    throw std::runtime_error("the loaded function has " + std::to_string(b.size()) + " concrete functions, the original " +
                             std::to_string(a.size()));
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].optimized_graph().to_string() != b[i].optimized_graph().to_string())
      throw std::runtime_error("the loaded function's optimised graph " + std::to_string(i) + " differs from the original's");
}

// The timed loop shared by both sides: two untimed calls first (steady state), page faults
// reported.
template <class Call>
void time_calls(benchmark::State& state, Call&& call) {
  tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(call()); });
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) benchmark::DoNotOptimize(call());
  tg_bench::report_faults(state, faults);
}

// Times `fn`'s call on `args...`, or the call of its save-and-load when kLoaded.
template <bool kLoaded, class F, class... Args>
void time_original_or_loaded(benchmark::State& state, tg::PolymorphicFunction<F>& fn, const char* file,
                             const Args&... args) {
  if constexpr (kLoaded) {
    const tg::LoadedFunction loaded = save_and_load(fn, file);
    check_same_plan(fn, loaded);
    time_calls(state, [&] { return loaded(args...); });
  } else {
    time_calls(state, [&] { return fn(args...); });
  }
}

// ---- original vs loaded ----------------------------------------------------------------------

template <bool kLoaded>
void BM_ExportMlpStep(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    tg_bench::Mlp m;
    auto step = tg::function([&m](const Tensor& x, const Tensor& y) { return tg_bench::train_step(m, x, y); },
                             {.name = "train_step"});
    step(m.x, m.y);  // traces (and takes one step; the loaded copy starts from the Variables after it)
    if (!TG_BENCH_HAVE_TAPE) state.SetLabel("hand-written backward");
    time_original_or_loaded<kLoaded>(state, step, "mlp.tgx", m.x, m.y);
  });
}
BENCHMARK(BM_ExportMlpStep<false>)->Name("export/mlp/train_step/original")->MinTime(0.3)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ExportMlpStep<true>)->Name("export/mlp/train_step/loaded")->MinTime(0.3)
    ->Unit(benchmark::kMicrosecond);

template <bool kLoaded>
void BM_ExportChain(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const Tensor x = tg_bench::input_of(16);
    auto f = tg::function([](const Tensor& t) { return tg_bench::chain<tg_bench::Act::kTanh>(t); }, {.name = "chain"});
    f(x);
    time_original_or_loaded<kLoaded>(state, f, "chain.tgx", x);
  });
}
BENCHMARK(BM_ExportChain<false>)->Name("export/chain/tanh/16/original")->MinTime(0.1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ExportChain<true>)->Name("export/chain/tanh/16/loaded")->MinTime(0.1)->Unit(benchmark::kMicrosecond);

// The inputs of call/add_f32_scalar/traced (function_call_bench.cpp).
template <bool kLoaded>
void BM_ExportScalarAdd(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const Tensor a = tg::constant(1.0f), b = tg::constant(2.0f);
    auto add = tg::function([](const Tensor& p, const Tensor& q) { return p + q; }, {.name = "add"});
    add(a, b);
    time_original_or_loaded<kLoaded>(state, add, "add.tgx", a, b);
  });
}
BENCHMARK(BM_ExportScalarAdd<false>)->Name("export/call/add_f32_scalar/original")->UseRealTime()->MinTime(0.2)
    ->Unit(benchmark::kNanosecond);
BENCHMARK(BM_ExportScalarAdd<true>)->Name("export/call/add_f32_scalar/loaded")->UseRealTime()->MinTime(0.2)
    ->Unit(benchmark::kNanosecond);

// ---- loading a large model file ----------------------------------------------------------------

constexpr std::size_t kPage = 4096;

// TG_BENCH_LOAD_GIB: the model's size in GiB (fractions allowed), 1 when unset; 0 disables.
double load_gib() {
  const char* s = std::getenv("TG_BENCH_LOAD_GIB");
  return s && *s ? std::strtod(s, nullptr) : 1.0;
}

// /proc/meminfo's MemAvailable in bytes (0 when unknown).
uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

std::string gib_str(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(uint64_t{1} << 30));
  return buf;
}

class ModelFile;

// The file mapped as the loader maps it (private, read-write) and every 4 KiB page read once.
struct TouchedMapping {
  explicit TouchedMapping(const ModelFile& f);
  ~TouchedMapping() { ::munmap(const_cast<unsigned char*>(data), size); }
  TouchedMapping(const TouchedMapping&) = delete;
  TouchedMapping& operator=(const TouchedMapping&) = delete;
  const unsigned char* data = nullptr;
  std::size_t size;
};

// n float32 zeros in a read-only mapping of a sparse temporary file (unlinked at once). The
// model's Variable holds them: reading them fills clean page-cache pages, which the kernel may
// drop, where a buffer of zeros would be anonymous memory (on this VM's kernel even untouched
// anonymous memory gets real pages when read).
Tensor file_backed_zeros(int64_t n) {
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  const std::string path = temp_path("zeros");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  std::remove(path.c_str());
  const int sized = ::ftruncate(fd, static_cast<off_t>(bytes));
  void* p = sized == 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("a sparse file of zeros: ") + std::strerror(err));
  std::shared_ptr<const void> owner(p, [bytes](const void* q) { ::munmap(const_cast<void*>(q), bytes); });
  auto impl = std::make_shared<tg::detail::TensorImpl>();
  impl->dtype = tg::float32;
  impl->shape = tg::TensorShape({n});
  impl->buffer = tg::detail::Buffer::wrap(tg::float32, n, p, std::move(owner));
  return Tensor(std::move(impl));
}

// The model file, made once per process by the first load benchmark that runs. It is unlinked as
// soon as it is written and kept open, and the benchmarks load it as /proc/self/fd/N: its disk
// space comes back when the process ends, however it ends.
class ModelFile {
 public:
  static const ModelFile& get() {
    static ModelFile file;
    if (!file.error_.empty()) throw std::runtime_error(file.error_);
    return file;
  }
  ~ModelFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  std::size_t size() const { return size_; }
  const Tensor& arg() const { return arg_; }

 private:
  ModelFile() {
    try {
      make();
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }

  void make() {
    const auto elements = static_cast<int64_t>(std::llround(load_gib() * double(int64_t{1} << 28)));
    const uint64_t bytes = static_cast<uint64_t>(elements) * sizeof(float);
    // Disk: the file (tg::save writes a temporary file and renames it) and some slack.
    struct statvfs fs {};
    if (::statvfs(temp_dir().c_str(), &fs) == 0) {
      const uint64_t free_bytes = uint64_t{fs.f_bavail} * fs.f_frsize;
      if (free_bytes < bytes + (uint64_t{256} << 20))
        throw std::runtime_error("skipped: " + gib_str(double(free_bytes)) + " free in " + temp_dir() + ", the " +
                                 gib_str(double(bytes)) + " model file needs more (TG_BENCH_LOAD_GIB)");
    }
    // Memory: the Variable's zeros and the written file, both page-cache pages (tg::save
    // streams the data from the Variable into the file without copying it).
    const uint64_t need = 2 * bytes + (uint64_t{256} << 20), avail = mem_available();
    if (avail != 0 && avail < need)
      throw std::runtime_error("skipped: " + gib_str(double(avail)) + " of memory available, saving the " +
                               gib_str(double(bytes)) + " model needs about " + gib_str(double(need)) +
                               " (TG_BENCH_LOAD_GIB)");
    const std::string saved = temp_path("model.tgx");
    arg_ = tg::constant(1.0f);
    {
      tg::Variable v(file_backed_zeros(elements), "weights");
      auto model = tg::function([&v](const Tensor& scale) { return tg::reduce_sum(v.read_value()) * scale; },
                                {.name = "model"});
      model.get_concrete_function(arg_);
      tg::save(saved, model);
    }
    fd_ = ::open(saved.c_str(), O_RDONLY | O_CLOEXEC);
    const int open_errno = errno;
    std::remove(saved.c_str());
    if (fd_ < 0) throw std::runtime_error("cannot open " + saved + ": " + std::strerror(open_errno));
    struct stat st {};
    ::fstat(fd_, &st);
    size_ = static_cast<std::size_t>(st.st_size);
    path_ = "/proc/self/fd/" + std::to_string(fd_);
    // Written back now, not during a measurement; then read once, so that every measurement
    // finds the file in the page cache, and mapped and touched once: the first mapping of
    // freshly written page-cache pages costs far more than later ones (on the 6.18 kernel of the
    // development VM, 305 ms against 16 ms for 1 GiB), and a measurement must not get it.
    ::fsync(fd_);
    std::vector<char> chunk(std::size_t{1} << 20);
    for (off_t at = 0; at < static_cast<off_t>(size_);) {
      const ssize_t n = ::pread(fd_, chunk.data(), chunk.size(), at);
      if (n <= 0) throw std::runtime_error("cannot read the model file back");
      at += n;
    }
    TouchedMapping warm(*this);
  }

  std::string error_;
  std::string path_;
  int fd_ = -1;
  std::size_t size_ = 0;
  Tensor arg_;
};

TouchedMapping::TouchedMapping(const ModelFile& f) : size(f.size()) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, f.fd(), 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
  data = static_cast<const unsigned char*>(p);
  unsigned sum = 0;
  for (std::size_t at = 0; at < size; at += kPage) sum += data[at];
  benchmark::DoNotOptimize(sum);
}

// The file's bytes per iteration (bench/run's work_per_iter, for GB/s) and its size in GiB.
void set_file_counters(benchmark::State& state, const ModelFile& f) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(f.size()));
  state.counters["work_per_iter"] = static_cast<double>(f.size());
  state.counters["file_gib"] = static_cast<double>(f.size()) / double(uint64_t{1} << 30);
}

// One timed iteration: `work` builds what is measured; it is destroyed (unmapped) untimed, so
// that both sides pay for setting up, not tearing down.
template <class Work>
void time_loads(benchmark::State& state, Work&& work) {
  const ModelFile& f = ModelFile::get();
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    auto made = work(f);
    state.PauseTiming();
    made.reset();
    state.ResumeTiming();
  }
  tg_bench::report_faults(state, faults);
  set_file_counters(state, f);
}

void BM_LoadMmapTouch(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    time_loads(state, [](const ModelFile& f) { return std::make_unique<TouchedMapping>(f); });
  });
}

template <bool kVerify, bool kFirstCall>
void BM_LoadModel(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    tg::LoadOptions options;
    options.verify_checksums = kVerify;
    time_loads(state, [&](const ModelFile& f) {
      auto loaded = std::make_unique<tg::LoadedFunction>(tg::load(f.path(), options));
      if constexpr (kFirstCall) benchmark::DoNotOptimize((*loaded)(f.arg()));
      return loaded;
    });
  });
}

// zlib's crc32_z alone over the whole file, already mapped and touched (untimed).
void BM_LoadCrc32(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const ModelFile& f = ModelFile::get();
    const TouchedMapping m(f);
    for (auto _ : state) benchmark::DoNotOptimize(crc32_z(crc32_z(0, Z_NULL, 0), m.data, m.size));
    set_file_counters(state, f);
  });
}

// Registered only when TG_BENCH_LOAD_GIB is not 0. Three iterations per repetition: each reads
// the whole file.
const bool kLoadBenchmarksRegistered = [] {
  if (!(load_gib() > 0)) return false;
  const auto add = [](const char* name, void (*fn)(benchmark::State&)) {
    benchmark::RegisterBenchmark(name, fn)->Iterations(3)->Unit(benchmark::kMillisecond);
  };
  add("export/load/mmap_touch", BM_LoadMmapTouch);
  add("export/load/verify", BM_LoadModel<true, false>);
  add("export/load/no_verify", BM_LoadModel<false, false>);
  add("export/load/verify+first_call", BM_LoadModel<true, true>);
  add("export/load/no_verify+first_call", BM_LoadModel<false, true>);
  add("export/load/crc32_z", BM_LoadCrc32);
  return true;
}();

}  // namespace
