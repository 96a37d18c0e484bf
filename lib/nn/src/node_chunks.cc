// See Note [Node chunks] in nn/node_chunks.h.
#include "trident/nn/node_chunks.h"

#include <mutex>

namespace trident::nn {
namespace {
std::mutex reads_mutex;
std::map<std::string, ChunkReads>& reads() {
  static std::map<std::string, ChunkReads> r;
  return r;
}
}  // namespace

std::map<std::string, ChunkReads> chunk_reads() {
  std::lock_guard<std::mutex> lock(reads_mutex);
  return reads();
}

void add_chunk_reads(const std::string& op, const ChunkReads& r) {
  std::lock_guard<std::mutex> lock(reads_mutex);
  auto& total = reads()[op];
  total.own += r.own, total.fresh += r.fresh, total.stale += r.stale, total.cold += r.cold;
}

}  // namespace trident::nn
