// What happens to the other ranks when one rank fails (CTest runs each mode under
// `mpirun -np 2` and checks the output names the failed rank, within a time limit):
//   hang   rank 1 stops calling collectives (it sleeps): rank 0 raises tg::DeadlineExceededError
//          naming rank 1 after its timeout, then ends the job
//   raise  rank 1 throws a tg:: error and returns from main: rank 0 gets an error, not a hang
//   kill   rank 1 is killed (SIGKILL): the job ends with an error that names rank 1
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>

#include <tracegraph/dist.h>
#include <tracegraph/tracegraph.h>

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "hang" && mode != "raise" && mode != "kill") {
    std::cerr << "usage: tg_dist_failure hang|raise|kill\n";
    return 2;
  }
  tg::dist::init({.collective_timeout_seconds = 3});
  // One collective that works, so that both ranks are known to be up.
  tg::dist::all_reduce(tg::constant(1.0f));
  if (tg::dist::rank() == 1) {
    if (mode == "hang") std::this_thread::sleep_for(std::chrono::seconds(120));
    if (mode == "kill") raise(SIGKILL);
    if (mode == "raise") {
      try {
        tg::reshape(tg::constant({1.0f, 2.0f, 3.0f}), {2, 2});
      } catch (const tg::Error& e) {
        std::cout << "rank 1 raised: " << e.what() << std::endl;
        return 1;
      }
    }
  }
  try {
    tg::dist::all_reduce(tg::constant({1.0f, 2.0f}));
    std::cout << "rank " << tg::dist::rank() << ": the collective completed, which it must not" << std::endl;
  } catch (const tg::DeadlineExceededError& e) {
    std::cout << "rank " << tg::dist::rank() << " caught tg::DeadlineExceededError (ranks";
    for (int r : e.ranks()) std::cout << " " << r;
    std::cout << "): " << e.what() << std::endl;
  } catch (const tg::Error& e) {
    std::cout << "rank " << tg::dist::rank() << " caught " << e.code() << ": " << e.what() << std::endl;
  }
  tg::dist::finalize();  // after a failed collective: ends the whole job
  return 0;
}
