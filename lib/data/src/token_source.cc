// Token files as Sources (Note [Token streams] in formats/token_files.h).
#include <cstring>

#include "mapped_file.h"
#include "trident/data/streams.h"
#include "trident/data/tokens.h"
#include "trident/formats/token_files.h"

namespace trident::data {
namespace {

class TokenSource final : public Source {
 public:
  TokenSource(formats::TokenFile file, std::string ids, std::int64_t positions, std::int64_t range,
              std::int64_t classes)
      : Source("tokens"), file_(std::move(file)), map_(file_.bin), ids_(std::move(ids)), T_(positions),
        classes_(classes) {
    if (file_.tokens < static_cast<std::uint64_t>(T_) + 1)
      throw DataError(file_.bin + ": holds " + std::to_string(file_.tokens) + " token ids; one sample of the model's " +
                      std::to_string(T_) + " positions takes " + std::to_string(T_ + 1));
    check_ids(range);
  }

  std::int64_t size() const override { return static_cast<std::int64_t>((file_.tokens - 1) / static_cast<std::uint64_t>(T_)); }
  std::int64_t num_classes() const override { return classes_; }
  std::map<std::string, graph::TensorSpec> specs() const override {
    return {{ids_, {{T_}, graph::DType::kInt64}}, {"label", {{T_}, graph::DType::kInt64}}};
  }
  std::uint64_t identity() const override { return file_.tokens * 1000003ULL + static_cast<std::uint64_t>(file_.item_bytes); }

  void read_sample(std::int64_t id, std::int64_t, std::map<std::string, torch::Tensor>& rows) const override {
    const std::uint64_t first = static_cast<std::uint64_t>(id) * static_cast<std::uint64_t>(T_);
    for (auto& [field, row] : rows) {
      auto* out = row.data_ptr<std::int64_t>();
      const std::uint64_t from = first + (field == "label" ? 1 : 0);
      for (std::int64_t k = 0; k < T_; ++k) out[k] = token(from + static_cast<std::uint64_t>(k));
    }
  }

 private:
  std::int64_t token(std::uint64_t at) const {
    const auto* p = map_.data() + at * static_cast<std::uint64_t>(file_.item_bytes);
    switch (file_.item_bytes) {
      case 1: return file_.is_signed ? static_cast<std::int8_t>(*p) : *p;
      case 2: {
        std::uint16_t v;
        std::memcpy(&v, p, 2);
        return file_.is_signed ? static_cast<std::int16_t>(v) : v;
      }
      case 4: {
        std::int32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      default: {
        std::int64_t v;
        std::memcpy(&v, p, 8);
        return v;
      }
    }
  }

  // Every id of the file below `range` (once, when opened: a pass over the
  // mapped file at memory speed).
  void check_ids(std::int64_t range) const {
    for (std::uint64_t i = 0; i < file_.tokens; ++i) {
      const auto v = token(i);
      if (v < 0 || v >= range)
        throw DataError(file_.bin + ": token id " + std::to_string(v) + " at position " + std::to_string(i) +
                        "; the model takes ids from 0 to " + std::to_string(range - 1) + " (its vocabulary)");
    }
  }

  formats::TokenFile file_;
  MappedFile map_;
  std::string ids_;
  std::int64_t T_, classes_;
};

}  // namespace

std::shared_ptr<const Source> open_token_file(const graph::OpGraph& graph, const std::string& path) {
  const auto input = token_input(graph);
  return std::make_shared<TokenSource>(formats::open_token_file(path), input.field, input.positions, input.range,
                                       graph.op(graph.loss()).inputs.at(0).expected.shape.back());
}

}  // namespace trident::data
