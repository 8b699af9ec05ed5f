// The Communicator that moves the collectives' bytes over MPI (Open MPI on Debian).
#pragma once
#include <mpi.h>

#include <array>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "ops/collective.h"

namespace tg::detail {

/// The size of one rank's answer to "what are you doing?" (a text; longer ones are cut).
inline constexpr int kMpiAnswerBytes = 512;

/// Every collective runs in two steps on its own duplicate of MPI_COMM_WORLD: first the ranks
/// compare a key of what they are about to do (CollectiveCall::key: one 16-byte all-reduce), and
/// only when all agree do the data move. The agreement is where a rank waits for the others, so it
/// is a nonblocking MPI call polled against a deadline; while it polls, a rank answers its peers'
/// questions ("what are you waiting in?") on a second communicator, which is how a rank that
/// timed out learns which peers are missing. Once all agree, every rank is in the same collective
/// and the data move with MPI's blocking calls, 1.6x (1 MiB) to 3.6x (16 MiB) faster than its
/// nonblocking ones on this machine.
class MpiCommunicator final : public Communicator {
 public:
  /// MPI must be initialised.
  explicit MpiCommunicator(double timeout_seconds);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(void* data, const CollectiveCall& call) override;
  void broadcast(void* data, const CollectiveCall& call) override;
  void reduce_to_root(void* data, const CollectiveCall& call) override;
  std::vector<int64_t> all_gather_counts(const CollectiveCall& call) override;
  void all_gather(const void* send, void* recv, const std::vector<int64_t>& counts,
                  const CollectiveCall& call) override;
  void check_traced_collectives(const std::string& function, const std::string& signature,
                                const std::string& sequence) override;

  /// Whether a collective failed (timed out, or MPI reported an error): the job cannot go on,
  /// since some rank may be stuck in a collective that will never complete.
  bool failed() const;

 private:
  // A desync check in progress: the function and the collectives it traced.
  struct CheckedFunction {
    const std::string* function;
    const std::string* sequence;
  };
  // The steps of all_reduce, broadcast and reduce_to_root: begin, agree, then `move` the data
  // with the MPI call in pieces of at most 2^30 elements (MPI counts are ints).
  void in_place_in_pieces(void* data, const CollectiveCall& call, const char* mpi_call,
                          const std::function<int(std::byte*, int)>& move);
  // Starts a collective described by `text`: raises at once when an earlier one failed.
  void begin(const std::string& text);
  // Step one of every collective: all ranks agree on `key`, or every rank raises
  // CollectiveMismatchError describing what each was doing (for a desync check, the first
  // collective the ranks traced differently).
  void agree(uint64_t key, const CheckedFunction* checked = nullptr);
  [[noreturn]] void report_mismatch(const CheckedFunction* checked);
  // Polls `request` until it completes, answering peers meanwhile; raises
  // DeadlineExceededError (naming the missing ranks) after the timeout.
  void wait(MPI_Request& request);
  [[noreturn]] void timed_out();
  void answer_questions();
  // Raises UnavailableError for an MPI error code, and marks the communicator failed.
  void check(int rc, const char* call);
  [[noreturn]] void fail_with(const std::string& message, int kind, std::vector<int> ranks = {});

  MPI_Comm data_ = MPI_COMM_NULL;     // the collectives
  MPI_Comm control_ = MPI_COMM_NULL;  // questions and answers about them
  int rank_ = 0;
  int size_ = 1;
  double timeout_seconds_;
  mutable std::mutex mu_;  // one collective at a time (MPI runs at MPI_THREAD_SERIALIZED)
  std::string doing_;  // "all_reduce(...) [eager collective #12]": what peers' questions are answered
  std::string failure_;  // the first failure; set once
  // Answers in flight (their buffers must live until MPI has sent them).
  std::deque<std::pair<MPI_Request, std::array<char, kMpiAnswerBytes>>> answers_;
};

}  // namespace tg::detail
