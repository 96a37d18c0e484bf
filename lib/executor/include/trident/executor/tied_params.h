// Note [Tied parameters]
// ~~~~~~~~~~~~~~~~~~~~~~
// A parameter that ops of two stages read (an input
// embedding that is also the output projection) lives on every stage that
// reads it. Each such copy gets only its own stage's part of the gradient,
// so before the optimizer steps, the gradients of every copy — all ranks of
// all stages that hold it, replicas included — are summed (all-reduce over
// a subgroup of exactly those ranks, parameters in name order). Then every
// copy steps with the whole gradient, from the same weights and optimizer
// state, and stays equal to the others: the model trains as one process
// would. The stage's replica sync leaves such parameters alone, so nothing
// is summed twice.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trident/comm/group.h"
#include "trident/graph/op_graph.h"
#include "trident/plan/plan.h"

namespace trident::executor {

// Parameter name -> the devices (world ranks, ascending) of every stage
// whose ops read it, for the parameters read by more than one stage.
std::map<std::string, std::vector<int>> tied_parameters(const plan::Plan& plan, const graph::OpGraph& graph);

class TiedSync {
 public:
  // Every rank calls it with the same plan; makes a subgroup per set of
  // holders (in name order) that this rank belongs to. `params` are this
  // rank's stage parameters.
  TiedSync(const plan::Plan& plan, const graph::OpGraph& graph, const comm::Group& world,
           const std::vector<std::pair<std::string, torch::Tensor>>& params);

  bool empty() const { return tied_.empty(); }
  const std::set<std::string>& names() const { return names_; }
  // Sums each tied parameter's gradient over its holders (a missing
  // gradient counts as zeros); blocks until done.
  void all_reduce();
  // After all_reduce(): ‖g‖² of the tied parameters of which this rank is
  // the first holder (see Note [Global gradient norm] in sync/grad_sync.h).
  double grad_square_sum() const;

 private:
  struct Tied {
    std::string name;
    torch::Tensor param;
    std::shared_ptr<comm::Group> group;
  };
  std::vector<Tied> tied_;
  std::set<std::string> names_;
};

}  // namespace trident::executor
