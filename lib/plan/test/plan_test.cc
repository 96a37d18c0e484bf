// Plans as data: hand-written plans on mmt/tiny checked against their graph,
// each wrong field named; replica shares and their JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hand_plans.h"

namespace trident::plan {
namespace {

using testing::HandPlan;


TEST_F(HandPlan, ValidationNamesTheProblem) {
  expect_error(make({branch(0, true, true), head()}, {{0}, {1}}), "is in no stage");
  auto dup = head();
  dup.push_back(branch(0, true, false)[0]);
  expect_error(make({branch(0, true, true), branch(1, true, true), dup}, {{0}, {1}, {2}}), "is in stage 0 and stage 2");
  expect_error(make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {0}, {2}}),
               "device 0 is used by stage 0 and stage 1");
  expect_error(make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {1}, {7}}), "device 7 is outside 0..3");
  // Early branch 0 with the head, late branch 0 apart: a path leaves and re-enters.
  auto with_head = branch(0, true, false);
  for (auto& h : head()) with_head.push_back(h);
  expect_error(make({with_head, branch(0, false, true), branch(1, true, true)}, {{0}, {1}, {2}}), "is not convex");
  // Each stage holds one branch's early and the other's late half: a cycle.
  auto a = branch(0, true, false), b = branch(1, true, false);
  for (auto& n : branch(1, false, true)) a.push_back(n);
  for (auto& n : branch(0, false, true)) b.push_back(n);
  expect_error(make({a, b, head()}, {{0}, {1}, {2}}), "form a cycle");
  auto bad_mb = make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {1, 2}, {3}});
  bad_mb.stages[1].micro_batch = 3;
  bad_mb.stages[0].micro_batch = 3, bad_mb.stages[2].micro_batch = 3;
  expect_error(bad_mb, "micro_batch 3 must divide mini_batch 8");
  auto sfb = make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {1, 2}, {3}});
  sfb.grad_sync["branch1.proj.bias"] = "sfb";
  expect_error(sfb, "applies only to Linear weights");
  auto sched = make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {1, 2}, {3}});
  sched.stages[0].actions = "F0 B0 F1 B1";
  sched.stages[1].actions = "F0 F1 B0 B1";
  sched.stages[2].actions = "F1 F0 B0 B1";
  expect_error(sched, "deadlocks");
  auto unknown = make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {1}, {2}});
  unknown.stages[2].ops.push_back("nope");
  expect_error(unknown, "op 'nope' is not in model mmt");
  // See Note [Micro-batch ratios]: neighbours' micro-batches must nest; stages
  // that are not neighbours need not.
  auto sizes = make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {1}, {2}});
  sizes.mini_batch = 12;
  sizes.stages[0].micro_batch = 4, sizes.stages[1].micro_batch = 6, sizes.stages[2].micro_batch = 12;
  validate_plan(sizes, g);
  sizes.stages[2].micro_batch = 6;
  expect_error(sizes, "stage 2 has micro_batch 6 and feeds on stage 0 of micro_batch 4; neighbouring stages'");
  // See Note [Recomputation]: a stage of dataset inputs alone has no forward to run again.
  auto rest = branch(0, true, true);
  rest.erase(std::find(rest.begin(), rest.end(), "modality0"));
  auto fields = make({{"modality0"}, rest, branch(1, true, true), head()}, {{0}, {1}, {2}, {3}});
  fields.stages[1].recompute = fields.stages[2].recompute = true;
  validate_plan(fields, g);  // stages that compute may recompute
  fields.stages[0].recompute = true;
  expect_error(fields, "stage 0: recompute is set, but the stage only reads dataset fields");
  // See Note [Replica shares]: one row count per device, each >= 1, summing to the micro-batch.
  auto shares = make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {1, 2}, {3}});
  shares.stages[1].shares = {3, 1};
  validate_plan(shares, g);
  EXPECT_EQ(shares.replica_rows(1, 0, 4), (std::pair<std::int64_t, std::int64_t>{0, 3}));
  EXPECT_EQ(shares.replica_rows(1, 1, 4), (std::pair<std::int64_t, std::int64_t>{3, 4}));
  EXPECT_EQ(shares.replica_rows(1, 1, 8), (std::pair<std::int64_t, std::int64_t>{6, 8}));  // a longer chunk, in proportion
  EXPECT_EQ(Plan::from_json(shares.to_json(), "p.json").stages[1].shares, (std::vector<int>{3, 1}));
  shares.stages[1].shares = {3, 2};
  expect_error(shares, "stage 1: shares [3, 2] sum to 5, not its micro_batch 4");
  shares.stages[1].shares = {4};
  expect_error(shares, "stage 1: shares [4] has 1 entries for 2 devices");
  shares.stages[1].shares = {4, 0};
  expect_error(shares, "stage 1: shares [4, 0] has 0; every device runs at least 1 row");
  auto uneven = make({branch(0, true, true), head()}, {{0}, {1, 2, 3}});
  for (auto& n : branch(1, true, true)) uneven.stages[0].ops.push_back(n);
  expect_error(uneven, "does not split evenly among its 3 devices; give shares");
}

}  // namespace
}  // namespace trident::plan
