#include "dist/mpi_communicator.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "core/check.h"
#include "tracegraph/errors.h"

namespace tg::detail {

namespace {

constexpr int kQuestionTag = 1;
constexpr int kAnswerTag = 2;
// At most this many elements per MPI call (MPI counts are ints); larger tensors go in pieces.
constexpr int64_t kMaxElementsPerCall = int64_t{1} << 30;
// How long a rank that timed out waits for its peers to say what they are doing.
constexpr double kQuestionSeconds = 2.0;

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Bool: return MPI_C_BOOL;
    case DType::String:
    case DType::BFloat16: break;  // collectives refuse both dtypes before they get here
  }
  throw InternalError(str_cat("internal check failed: a ", to_string(d), " tensor reached an MPI collective"));
}

MPI_Op mpi_op(Reduction r) {
  switch (r) {
    case Reduction::kSum:
    case Reduction::kMean: return MPI_SUM;  // the kernel divides
    case Reduction::kMax: return MPI_MAX;
    case Reduction::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A fixed-size text for the all-gathers of a mismatch report; long texts end in "...".
template <std::size_t N>
void put_text(std::array<char, N>& buf, std::size_t at, const std::string& text) {
  const std::size_t room = N - at - 1;
  if (text.size() <= room) {
    std::memcpy(buf.data() + at, text.data(), text.size());
    buf[at + text.size()] = '\0';
  } else {
    std::memcpy(buf.data() + at, text.data(), room - 3);
    std::memcpy(buf.data() + at + room - 3, "...", 3);
    buf[N - 1] = '\0';
  }
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += str_cat(i ? ", " : "", ranks[i]);
  return s;
}

enum FailureKind { kDeadline, kUnavailable };

}  // namespace

// The questions a rank asks when it timed out, and the buffers for their answers. MPI may still
// write an answer after the rank gave up waiting (the job is failing then), so this is never
// freed.
struct PendingInquiry {
  int question = 0;
  std::vector<std::array<char, kMpiAnswerBytes>> answers;
  std::vector<MPI_Request> requests;
};

MpiCommunicator::MpiCommunicator(double timeout_seconds) : timeout_seconds_(timeout_seconds) {
  // Errors come back as codes (raised as tg::UnavailableError), not as an abort of the job.
  MPI_Comm_dup(MPI_COMM_WORLD, &data_);
  MPI_Comm_dup(MPI_COMM_WORLD, &control_);
  MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(data_, &rank_);
  MPI_Comm_size(data_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  // After a failure a collective may still be pending on these; the job is aborted instead.
  if (!failed()) {
    while (!answers_.empty()) {  // answers to peers that asked: let them go out first
      MPI_Wait(&answers_.front().first, MPI_STATUS_IGNORE);
      answers_.pop_front();
    }
    MPI_Comm_free(&control_);
    MPI_Comm_free(&data_);
  }
}

bool MpiCommunicator::failed() const {
  std::lock_guard lock(mu_);
  return !failure_.empty();
}

void MpiCommunicator::begin(const std::string& text) {
  if (!failure_.empty())
    throw UnavailableError(str_cat(
        "[tg::dist] a collective failed earlier on this rank, so the job cannot go on (another rank may be "
        "stuck in it): ", failure_, " Restart the job, from the last checkpoint (tg::restore_variables)"));
  doing_ = text;
}

void MpiCommunicator::check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  fail_with(str_cat("[tg::dist] ", call, " failed in ", doing_, " on rank ", rank_, ": MPI reports '",
                    std::string(text, static_cast<std::size_t>(length)),
                    "' (a peer process died, or the connection to it broke)."),
            kUnavailable);
}

void MpiCommunicator::fail_with(const std::string& message, int kind, std::vector<int> ranks) {
  failure_ = message;
  if (kind == kDeadline) throw DeadlineExceededError(message, std::move(ranks));
  throw UnavailableError(message);
}

void MpiCommunicator::answer_questions() {
  for (;;) {
    int asked = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQuestionTag, control_, &asked, &status) != MPI_SUCCESS || !asked) break;
    int question = 0;
    if (MPI_Recv(&question, 1, MPI_INT, status.MPI_SOURCE, kQuestionTag, control_, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      break;
    auto& answer = answers_.emplace_back();
    put_text(answer.second, 0, doing_);
    if (MPI_Isend(answer.second.data(), kMpiAnswerBytes, MPI_CHAR, status.MPI_SOURCE, kAnswerTag, control_,
                  &answer.first) != MPI_SUCCESS)
      answers_.pop_back();
  }
  while (!answers_.empty()) {
    int sent = 0;
    if (MPI_Test(&answers_.front().first, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS || !sent) break;
    answers_.pop_front();
  }
}

void MpiCommunicator::wait(MPI_Request& request) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_seconds_));
  // Ranks in step finish a collective within microseconds to milliseconds: spin (yielding the
  // core, as Open MPI does when oversubscribed) for the first 50 ms, then poll every 200 us so
  // that a rank waiting long for a slow peer leaves the machine to it.
  for (uint64_t polls = 1;; ++polls) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    if (polls % 64 == 0) {
      answer_questions();
      const auto now = Clock::now();
      if (now >= deadline) timed_out();
      if (now - start > std::chrono::milliseconds(50)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
    }
    std::this_thread::yield();
  }
}

void MpiCommunicator::timed_out() {
  // Ask every peer what it is doing. A peer that waits in a collective answers at once; one
  // that died, hangs, or left the collectives (an exception on that rank) does not.
  // On the heap and never destroyed: no static destructor may free a buffer MPI still writes to.
  static auto* never_freed = new std::vector<std::unique_ptr<PendingInquiry>>;
  auto inquiry = std::make_unique<PendingInquiry>();
  inquiry->question = rank_;
  inquiry->answers.resize(static_cast<std::size_t>(size_));
  inquiry->requests.assign(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  std::vector<MPI_Request> asks(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const auto k = static_cast<std::size_t>(p);
    MPI_Isend(&inquiry->question, 1, MPI_INT, p, kQuestionTag, control_, &asks[k]);
    MPI_Irecv(inquiry->answers[k].data(), kMpiAnswerBytes, MPI_CHAR, p, kAnswerTag, control_, &inquiry->requests[k]);
  }
  const double grace = std::min(kQuestionSeconds, timeout_seconds_);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double>(grace));
  std::vector<bool> answered(static_cast<std::size_t>(size_), false);
  answered[static_cast<std::size_t>(rank_)] = true;
  while (std::chrono::steady_clock::now() < until &&
         std::find(answered.begin(), answered.end(), false) != answered.end()) {
    for (int p = 0; p < size_; ++p) {
      const auto k = static_cast<std::size_t>(p);
      if (answered[k]) continue;
      int done = 0;
      if (MPI_Test(&inquiry->requests[k], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) answered[k] = true;
    }
    answer_questions();  // peers that timed out too ask this rank
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<int> missing;
  std::string answers;
  for (int p = 0; p < size_; ++p) {
    const auto k = static_cast<std::size_t>(p);
    if (p == rank_) continue;
    if (!answered[k]) {
      missing.push_back(p);
      continue;
    }
    inquiry->answers[k][kMpiAnswerBytes - 1] = '\0';
    const std::string text = inquiry->answers[k].data();
    answers += str_cat(" Rank ", p, " is at ", text == doing_ ? std::string("the same collective") : text, ".");
  }
  never_freed->push_back(std::move(inquiry));
  std::string message = str_cat("[tg::dist] rank ", rank_, " waited ", timeout_seconds_, " s in ", doing_,
                                " and the other ranks did not all arrive (the timeout is "
                                "tg::dist::Options::collective_timeout_seconds).");
  if (!missing.empty())
    message += str_cat(" Rank", missing.size() == 1 ? " " : "s ", rank_list(missing), " did not answer within ",
                       grace, " s: ", missing.size() == 1 ? "it died, hangs, or stopped" : "they died, hang, or stopped",
                       " calling collectives (an error on that rank? look at its output).");
  message += answers;
  message += " This rank cannot go on; tg::dist::finalize (or the end of the program) ends the job.";
  fail_with(message, kDeadline, std::move(missing));
}

void MpiCommunicator::agree(uint64_t key, const CheckedFunction* checked) {
  uint64_t mine[2] = {key, ~key};
  uint64_t all[2] = {0, 0};
  MPI_Request request;
  check(MPI_Iallreduce(mine, all, 2, MPI_UINT64_T, MPI_MAX, data_, &request), "MPI_Iallreduce");
  wait(request);
  // max(key) == key and max(~key) == ~key, i.e. min(key) == key, on every rank alike.
  if (all[0] == key && all[1] == ~key) return;
  report_mismatch(checked);
}

void MpiCommunicator::report_mismatch(const CheckedFunction* checked) {
  // Every rank is here: each completed the key exchange above. What each was doing travels in
  // one all-gather of fixed-size records (the function's hash, for a desync check, then the
  // text), so every rank writes the same report and the communicator stays usable.
  std::array<char, kMpiAnswerBytes> mine{};
  const uint64_t function_hash = checked ? fnv1a(*checked->function) | 1 : 0;
  std::memcpy(mine.data(), &function_hash, sizeof function_hash);
  put_text(mine, sizeof function_hash, doing_);
  std::vector<std::array<char, kMpiAnswerBytes>> all(static_cast<std::size_t>(size_));
  MPI_Request request;
  check(MPI_Iallgather(mine.data(), kMpiAnswerBytes, MPI_CHAR, all.data(), kMpiAnswerBytes, MPI_CHAR, data_, &request),
        "MPI_Iallgather");
  wait(request);
  bool same_check = true;
  std::string doing;
  for (int p = 0; p < size_; ++p) {
    const auto& record = all[static_cast<std::size_t>(p)];
    uint64_t h = 0;
    std::memcpy(&h, record.data(), sizeof h);
    same_check = same_check && h != 0 && h == function_hash;
    doing += str_cat("\n  rank ", p, ": ", std::string(record.data() + sizeof h));
  }
  const std::string fix =
      "\nUsually one rank retraced for other input shapes or other literal arguments, or took another branch "
      "of C++ control flow. Give every rank batches of the same shape (tg::dist::shard gives every rank as "
      "many examples; drop the last partial batch), or trace with an input_signature whose batch dimension "
      "is None. Ranks at different calls of one function (or different eager collectives) are out of step: a "
      "call raised on one of them before reaching this collective (look at that rank's output) and the program "
      "went on; that cannot be repaired within the job, so restart it from the last checkpoint.";
  if (!same_check)
    throw CollectiveMismatchError(str_cat(
        "[tg::dist] the ranks reached different collectives at the same point; left alone the job would hang "
        "or combine unrelated tensors:", doing, fix));

  // Every rank is checking the same function, traced differently: find the first collective
  // in which the traces differ.
  int64_t length = static_cast<int64_t>(checked->sequence->size());
  std::vector<int64_t> lengths(static_cast<std::size_t>(size_));
  check(MPI_Iallgather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, data_, &request), "MPI_Iallgather");
  wait(request);
  std::vector<int> counts, displacements;
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l > INT_MAX || total > INT_MAX - l)
      throw CollectiveMismatchError(str_cat("[tg::dist] function '", *checked->function,
                                            "': the ranks traced different collectives (the lists are too long to "
                                            "compare here):", doing, fix));
    displacements.push_back(static_cast<int>(total));
    counts.push_back(static_cast<int>(l));
    total += l;
  }
  std::string everything(static_cast<std::size_t>(total), '\0');
  check(MPI_Iallgatherv(checked->sequence->data(), static_cast<int>(length), MPI_CHAR, everything.data(),
                        counts.data(), displacements.data(), MPI_CHAR, data_, &request),
        "MPI_Iallgatherv");
  wait(request);
  std::vector<std::vector<std::string>> traced;
  std::size_t longest = 0;
  for (int p = 0; p < size_; ++p) {
    const auto k = static_cast<std::size_t>(p);
    traced.push_back(lines_of(everything.substr(static_cast<std::size_t>(displacements[k]),
                                                static_cast<std::size_t>(counts[k]))));
    longest = std::max(longest, traced.back().size());
  }
  std::size_t first = 0;
  auto line = [&](std::size_t p, std::size_t i) {
    return i < traced[p].size() ? traced[p][i] : str_cat("(nothing: it traced ", traced[p].size(), " collectives)");
  };
  for (; first < longest; ++first) {
    bool differ = false;
    for (std::size_t p = 1; p < traced.size(); ++p) differ = differ || line(p, first) != line(0, first);
    if (differ) break;
  }
  std::string difference;
  for (std::size_t p = 0; p < traced.size(); ++p) difference += str_cat("\n  rank ", p, ": ", line(p, first));
  throw CollectiveMismatchError(str_cat(
      "[tg::dist] function '", *checked->function, "': the ranks traced different collectives, so its first run "
      "would hang or combine unrelated tensors. The first difference is traced collective #", first + 1, ":",
      difference, "\nWhat each rank is running:", doing, fix));
}

void MpiCommunicator::in_place_in_pieces(void* data, const CollectiveCall& call, const char* mpi_call,
                                         const std::function<int(std::byte*, int)>& move) {
  std::lock_guard lock(mu_);
  begin(call.describe());
  agree(call.key());
  auto* p = static_cast<std::byte*>(data);
  const std::size_t elem = dtype_size(call.dtype);
  for (int64_t done = 0; done < call.count;) {
    const int64_t n = std::min(call.count - done, kMaxElementsPerCall);
    check(move(p + static_cast<std::size_t>(done) * elem, static_cast<int>(n)), mpi_call);
    done += n;
  }
}

void MpiCommunicator::all_reduce(void* data, const CollectiveCall& call) {
  in_place_in_pieces(data, call, "MPI_Allreduce", [&](std::byte* at, int n) {
    return MPI_Allreduce(MPI_IN_PLACE, at, n, mpi_type(call.dtype), mpi_op(call.reduction), data_);
  });
}

void MpiCommunicator::broadcast(void* data, const CollectiveCall& call) {
  in_place_in_pieces(data, call, "MPI_Bcast", [&](std::byte* at, int n) {
    return MPI_Bcast(at, n, mpi_type(call.dtype), static_cast<int>(call.root), data_);
  });
}

void MpiCommunicator::reduce_to_root(void* data, const CollectiveCall& call) {
  const bool root = rank_ == call.root;
  in_place_in_pieces(data, call, "MPI_Reduce", [&](std::byte* at, int n) {
    return MPI_Reduce(root ? MPI_IN_PLACE : at, root ? at : nullptr, n, mpi_type(call.dtype), MPI_SUM,
                      static_cast<int>(call.root), data_);
  });
}

std::vector<int64_t> MpiCommunicator::all_gather_counts(const CollectiveCall& call) {
  std::lock_guard lock(mu_);
  begin(call.describe());
  agree(call.key());
  int64_t mine = call.count;
  std::vector<int64_t> all(static_cast<std::size_t>(size_));
  check(MPI_Allgather(&mine, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, data_), "MPI_Allgather");
  return all;
}

void MpiCommunicator::all_gather(const void* send, void* recv, const std::vector<int64_t>& counts,
                                 const CollectiveCall& call) {
  std::lock_guard lock(mu_);
  if (call.agreed_count == 0) return;  // rows of nothing: nothing travels
  // Whole rows as one MPI type keeps the counts (rows) within MPI's ints.
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (call.agreed_count > INT_MAX || total > INT_MAX)
    op_error<InvalidArgumentError>("all_gather", "gathers ", total, " rows of ", call.agreed_count,
                                   " elements; more than 2^31 - 1 rows, or rows of more than 2^31 - 1 elements, "
                                   "do not fit one MPI call: gather the tensor in parts");
  MPI_Datatype row;
  check(MPI_Type_contiguous(static_cast<int>(call.agreed_count), mpi_type(call.dtype), &row), "MPI_Type_contiguous");
  MPI_Type_commit(&row);
  std::vector<int> rows, displacements;
  int at = 0;
  for (int64_t c : counts) {
    rows.push_back(static_cast<int>(c));
    displacements.push_back(at);
    at += static_cast<int>(c);
  }
  const int rc =
      MPI_Allgatherv(send, static_cast<int>(call.count), row, recv, rows.data(), displacements.data(), row, data_);
  MPI_Type_free(&row);
  check(rc, "MPI_Allgatherv");
}

void MpiCommunicator::check_traced_collectives(const std::string& function, const std::string& signature,
                                               const std::string& sequence) {
  std::lock_guard lock(mu_);
  const std::size_t n = static_cast<std::size_t>(std::count(sequence.begin(), sequence.end(), '\n'));
  begin(str_cat("the check of function '", function, "' before its first run (its trace for ", signature, " holds ", n,
                " collective", n == 1 ? "" : "s", ")"));
  const CheckedFunction checked{&function, &sequence};
  agree(fnv1a(sequence, fnv1a(function + "\n")), &checked);
}

}  // namespace tg::detail
