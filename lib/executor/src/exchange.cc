// StageExecutor's messages between stages (Notes [Tags] and [Rows and
// pieces] in stage_executor.h): tags, receives posted ahead and taken,
// pieces gathered and sent, sends waited for, and the error that names a
// peer.
#include <algorithm>

#include "stage_parts.h"
#include "trident/base/text.h"

namespace trident::executor {

int StageExecutor::tag_span(const Layout& l) const { return delayed() ? 2 * l.tag_micro_batches : l.tag_micro_batches; }

int StageExecutor::message_number(const Piece& piece, int m, const Layout& l) const {
  if (!delayed()) return piece.message(m);
  const int next = m >= micro_batches_ ? 1 : 0;  // See Note [Tags]: two mini-batches in flight
  const auto parity = static_cast<int>((random_step_ + next) % 2);
  return piece.message(m - next * micro_batches_) + parity * l.tag_micro_batches;
}

void StageExecutor::wait_sends(std::vector<Posted>& sends, const std::string& what) {
  for (auto& sent : sends) {
    try {
      sent.work->wait(world_.timeout());
    } catch (const std::exception& e) {
      fail(what, sent.peer, e);
    }
  }
  sends.clear();
}

void StageExecutor::post_next(Exchange& x, int d) {
  auto& dir = x.dir[d];
  if (dir.next >= dir.order.size()) return;
  const int m = dir.order[dir.next++];
  const auto& pieces = *dir.pieces;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const auto& c = crossings_[pieces[i].k];
    if ((d == 1 && !c.differentiable) || !pieces[i].in(m)) continue;
    const auto rows = pieces[i].hi - pieces[i].lo;
    auto buffer = backend_->buffer(c, rows);
    std::vector<at::Tensor> v{buffer};
    c10::intrusive_ptr<c10d::Work> work;
    const auto t = tag(pieces[i].k, message_number(pieces[i], m, *x.layout), tag_span(*x.layout), d);
    try {
      work = link(d).pg().recv(v, pieces[i].peer, static_cast<int>(t));
    } catch (const std::exception& e) {
      fail("could not post the receive of " + std::string(d ? "gradients of " : "activations of ") + c.name +
               " for micro-batch " + std::to_string(m) + " from",
           pieces[i].peer, e);
    }
    dir.posted[i][m] = Posted{buffer, std::move(work), pieces[i].peer};
  }
}

torch::Tensor StageExecutor::take(Exchange& x, int d, std::size_t i, int m) {
  auto& dir = x.dir[d];
  auto it = dir.posted[i].find(m);
  const auto& piece = (*dir.pieces)[i];
  const auto& c = crossings_[piece.k];
  const std::string what = (d ? "gradients of " : "activations of ") + c.name;
  if (it == dir.posted[i].end())
    throw PipelineError("needs " + what + " that were never posted (schedule out of order)", ErrorKind::kFailure);
  try {
    it->second.work->wait(world_.timeout());
  } catch (const std::exception& e) {
    fail("waited for " + what + " from", piece.peer, e);
  }
  auto buffer = std::move(it->second.buffer);
  dir.posted[i].erase(it);
  return buffer;
}

// This rank's rows of crossing k for micro-batch m, from its pieces in row order.
torch::Tensor StageExecutor::gather(Exchange& x, int d, int k, int m) {
  const auto& pieces = *x.dir[d].pieces;
  std::vector<std::pair<std::int64_t, torch::Tensor>> parts;
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].k == k && pieces[i].in(m)) parts.emplace_back(pieces[i].lo, take(x, d, i, m));
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<torch::Tensor> ts;
  for (auto& [lo, t] : parts) ts.push_back(t);
  return ts.size() == 1 ? ts[0] : torch::cat(ts);
}

void StageExecutor::send(Exchange& x, const Piece& piece, const torch::Tensor& value, int m, int d) {
  const auto& c = crossings_[piece.k];
  auto slice = value.narrow(0, piece.lo - x.layout->row_begin, piece.hi - piece.lo).detach().contiguous();
  // An ATen op's bf16 result crosses as its declared fp32 (exact; see Note
  // [Precision policy]).
  const auto declared = tensor::to_torch(c.declared.dtype);
  if (slice.is_floating_point() && c10::isFloatingType(declared) && slice.scalar_type() != declared)
    slice = slice.to(declared);
  if (!tensor::matches(slice, c.declared) || slice.size(0) != piece.hi - piece.lo)
    throw PipelineError("edge " + c.name + " declares [" +
                        std::to_string(piece.hi - piece.lo) + (c.declared.shape.empty() ? "" : ",") +
                        graph::to_string(c.declared).substr(1) + " but the stage produced " + tensor::describe(slice) +
                        (d ? " as its gradient" : ""));
  post_send(x, piece, slice, m, d);
}

void StageExecutor::post_send(Exchange& x, const Piece& piece, const torch::Tensor& message, int m, int d) {
  std::vector<at::Tensor> v{message};
  try {
    const auto t = tag(piece.k, message_number(piece, m, *x.layout), tag_span(*x.layout), d);
    x.sends.push_back({message, link(d).pg().send(v, piece.peer, static_cast<int>(t)), piece.peer,
                       delayed() && d == 0 && m >= micro_batches_});
    bytes_sent_ += static_cast<std::int64_t>(message.nbytes());
  } catch (const std::exception& e) {
    fail("could not send " + std::string(d ? "gradients of " : "activations of ") + crossings_[piece.k].name +
             " for micro-batch " + std::to_string(m) + " to",
         piece.peer, e);
  }
}

void StageExecutor::fail(const std::string& what, int peer, const std::exception& e) const {
  const auto lost = world_.diagnose();
  throw comm::CommError(what + " rank " + std::to_string(peer) + " (stage " + std::to_string(stage_of_device_[peer]) +
                            ")" + (lost.empty() ? "" : " (" + lost + ")") + ": " + first_line(e),
                        ErrorKind::kFailure, context());
}

}  // namespace trident::executor
