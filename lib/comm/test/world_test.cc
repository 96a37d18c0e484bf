// The world (rank and size from each launcher's environment, rendezvous
// ports) and groups (job ids, ranks that never arrive, subgroup names).
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "trident/comm/group.h"
#include "trident/comm/world.h"

namespace trident::comm {
namespace {

void expect_error(const std::map<std::string, std::string>& env, const std::string& needle) {
  try {
    world_from_env(env);
    FAIL() << "expected CommError with " << needle;
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(World, ReadsEachLauncherAndRejectsDisagreement) {
  auto w = world_from_env({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "29511"}});
  EXPECT_EQ(w.rank, 2);
  EXPECT_EQ(w.world_size, 4);
  EXPECT_EQ(w.local_rank, 0);
  EXPECT_EQ(w.master_addr, "n1");
  EXPECT_EQ(w.master_port, 29511);
  EXPECT_EQ(w.launcher, "torchrun");
  w = world_from_env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(w.launcher, "mpirun");
  EXPECT_EQ(w.local_rank, 1);
  w = world_from_env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1"}});
  EXPECT_EQ(w.launcher, "srun");
  EXPECT_EQ(w.rank, 3);
  w = world_from_env({});
  EXPECT_EQ(w.world_size, 1);
  EXPECT_EQ(w.launcher, "none");
  // srun sets SLURM_* and the user's script sets RANK too: they must agree.
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
               "launchers disagree: RANK=0, WORLD_SIZE=2 (torchrun) but SLURM_PROCID=1, SLURM_NTASKS=2 (srun)");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "MASTER_ADDR is missing");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}, "MASTER_PORT is missing");
  expect_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x' is not a non-negative integer");
  expect_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 must be below WORLD_SIZE=2");
  expect_error({{"RANK", "0"}}, "WORLD_SIZE is missing but RANK is set");
}

TEST(World, ReadsTheJobId) {
  EXPECT_EQ(world_from_env({{"TRIDENT_JOB_ID", "a"}, {"SLURM_JOB_ID", "7"}}).job_id, "a");
  EXPECT_EQ(world_from_env({{"SLURM_JOB_ID", "7"}}).job_id, "7");
  EXPECT_EQ(world_from_env({}).job_id, "");
}

// See Note [Free ports]: a rendezvous port lies below the ephemeral range, where
// no outgoing connection or port-0 listener can take it, and was free.
TEST(World, AFreeLocalPortLiesBelowTheEphemeralRange) {
  const auto [low, high] = ephemeral_ports();
  ASSERT_LE(low, high);
  if (low - 1024 < 64) GTEST_SKIP() << "the ephemeral range starts at " << low << ": no room below it";
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    const int port = free_local_port();
    EXPECT_GE(port, 1024);
    EXPECT_LT(port, low);
    seen.insert(port);
  }
  EXPECT_GT(seen.size(), 1u) << "drawn at random, so two jobs rarely try the same port";
}

// See Note [Job ids]: a worker of another job that reaches this job's
// rendezvous is refused, naming both jobs, as bad input.
TEST(Group, AWorkerOfAnotherJobIsRefused) {
  WorldInfo a;
  a.rank = 0, a.world_size = 2, a.master_port = free_local_port(), a.job_id = "job-a";
  WorldInfo b = a;
  b.rank = 1, b.job_id = "job-b";
  std::thread host([&] {
    try {
      Group::connect(a, std::chrono::seconds(3));  // waits for a rank 1 that never joins
    } catch (const std::exception&) {
    }
  });
  try {
    Group::connect(b, std::chrono::seconds(3));
    ADD_FAILURE() << "a worker of job-b joined job-a";
  } catch (const CommError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("rank 1 of job 'job-b' reached the rendezvous of job 'job-a' at 127.0.0.1:"),
              std::string::npos)
        << e.what();
  }
  host.join();
}

// See Note [Arrivals]: the ranks that came wait for one that never does longer
// than a rank's own attempt to reach the store (so that rank fails first),
// then fail naming it.
TEST(Group, ARankThatNeverArrivesIsNamedAfterTheOthersWaitedLonger) {
  WorldInfo w;
  w.world_size = 3, w.master_port = free_local_port();
  const auto timeout = std::chrono::seconds(1);
  std::string said[2];
  double waited[2] = {0, 0};
  auto join = [&](int r) {
    WorldInfo mine = w;
    mine.rank = r;
    const auto start = std::chrono::steady_clock::now();
    try {
      Group::connect(mine, timeout);
    } catch (const CommError& e) {
      said[r] = e.what();
    }
    waited[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::thread host(join, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0's store is up
  join(1);
  host.join();
  // Rank 0 names the missing rank; rank 1, whose deadline came later, may
  // instead find rank 0's store gone with it.
  EXPECT_NE(said[0].find("rank 0: rank(s) 2 did not reach the rendezvous at 127.0.0.1:" +
                         std::to_string(w.master_port) + " within 3.5 s"),
            std::string::npos)
      << said[0];
  EXPECT_FALSE(said[1].empty());
  for (int r = 0; r < 2; ++r) EXPECT_GE(waited[r], 1.5) << "rank " << r;  // the connect timeout and half of it again

}

// The processes on this host, which share its cores (see Note [Thread defaults]).
TEST(World, ReadsEachLaunchersLocalSize) {
  const std::map<std::string, std::string> master{{"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1"}};
  auto with = [&](std::map<std::string, std::string> env) {
    env.insert(master.begin(), master.end());
    return world_from_env(env).local_size;
  };
  EXPECT_EQ(with({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}}), 4);
  EXPECT_EQ(with({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "6"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}), 3);
  EXPECT_EQ(with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_NTASKS_PER_NODE", "2"}}), 2);
  // srun without --ntasks-per-node: this node's entry of the compressed list.
  const std::map<std::string, std::string> slurm{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "7"}, {"SLURM_TASKS_PER_NODE", "2(x3),1"}};
  auto on_node = [&](const char* node) {
    auto env = slurm;
    env["SLURM_NODEID"] = node;
    return with(env);
  };
  EXPECT_EQ(on_node("0"), 2);
  EXPECT_EQ(on_node("2"), 2);
  EXPECT_EQ(on_node("3"), 1);
  // No local count given: every process is taken to be here.
  EXPECT_EQ(with({{"RANK", "0"}, {"WORLD_SIZE", "3"}}), 3);
  EXPECT_EQ(world_from_env({}).local_size, 1);
  expect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "two"}, {"SLURM_NODEID", "0"},
                {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
               "SLURM_TASKS_PER_NODE='two' is not a list like 2(x3),1");
}

// Messages name world ranks: a subgroup's own numbering means nothing to a user.
TEST(Group, SubgroupMembersAreNamedByWorldRank) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> names(3), errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto world = Group::over_store(store, r, 3, std::chrono::seconds(20));
        // Every rank stays until all are done: a rank leaving early closes its connections.
        auto barrier = [&] {
          std::vector<at::Tensor> one{torch::zeros({1})};
          world.pg().allreduce(one)->wait();
        };
        if (r == 0) {
          try {
            world.subgroup({1, 2}, "stage1");  // not a member: throws before any collective
          } catch (const std::exception& e) {
            errors[r] = e.what();
          }
          barrier();
          return;
        }
        auto sub = world.subgroup({1, 2}, "stage1");
        names[r] = sub.member(0) + " | " + sub.member(1) + " | " + std::to_string(sub.world_rank());
        barrier();
      } catch (const std::exception& e) {
        errors[r] += e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "rank 0 is not in group 'stage1'");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(errors[2], "");
  EXPECT_EQ(names[1], "rank 1 (member 0 of 'stage1') | rank 2 (member 1 of 'stage1') | 1");
  EXPECT_EQ(names[2], "rank 1 (member 0 of 'stage1') | rank 2 (member 1 of 'stage1') | 2");
}

}  // namespace
}  // namespace trident::comm
