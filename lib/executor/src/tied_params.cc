// See Note [Tied parameters] in tied_params.h.
#include "trident/executor/tied_params.h"

#include <algorithm>

#include "trident/sync/grad_sync.h"

namespace trident::executor {

std::map<std::string, std::vector<int>> tied_parameters(const plan::Plan& plan, const graph::OpGraph& graph) {
  std::map<std::string, std::set<int>> stages, devices;
  for (std::size_t s = 0; s < plan.stages.size(); ++s)
    for (const auto& op : plan.stages[s].ops)
      for (const auto& p : graph.op(graph.id_of(op)).params) {
        stages[p.name].insert(static_cast<int>(s));
        devices[p.name].insert(plan.stages[s].devices.begin(), plan.stages[s].devices.end());
      }
  std::map<std::string, std::vector<int>> out;
  for (const auto& [name, held] : stages)
    if (held.size() > 1) out[name] = std::vector<int>(devices[name].begin(), devices[name].end());
  return out;
}

TiedSync::TiedSync(const plan::Plan& plan, const graph::OpGraph& graph, const comm::Group& world,
                   const std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::map<std::vector<int>, std::shared_ptr<comm::Group>> groups;
  for (const auto& [name, holders] : tied_parameters(plan, graph)) {
    names_.insert(name);
    if (!std::binary_search(holders.begin(), holders.end(), world.rank())) continue;
    auto& group = groups[holders];
    if (!group) group = std::make_shared<comm::Group>(world.subgroup(holders, "tied" + std::to_string(groups.size())));
    auto it = std::find_if(params.begin(), params.end(), [&](const auto& p) { return p.first == name; });
    if (it == params.end()) continue;  // an emulated stage holds no tensors
    tied_.push_back({name, it->second, group});
  }
}

void TiedSync::all_reduce() {
  for (auto& t : tied_) {
    if (!t.param.grad().defined()) t.param.mutable_grad() = torch::zeros_like(t.param);
    std::vector<at::Tensor> grads{t.param.mutable_grad()};
    t.group->pg().allreduce(grads)->wait();
  }
}

double TiedSync::grad_square_sum() const {
  double sum = 0;
  for (const auto& t : tied_)
    if (t.group->rank() == 0) sum += sync::square_sum(t.param.grad());
  return sum;
}

}  // namespace trident::executor
