// Datasets read from files as they are needed (Note [Sources] in
// data/source.h): image folders and WebDataset shards (decoded and
// transformed per sample), token files, and .npy directories mapped into
// memory. docs/data.md is the user's guide.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "trident/data/source.h"
#include "trident/formats/sample_index.h"
#include "trident/graph/op_graph.h"
#include "trident/images/transforms.h"

namespace trident::data {

// What an image source makes of each sample: the model's image field and
// its [channels, height, width], the transforms and the run's seed.
struct ImageOptions {
  std::string field = "image";
  int channels = 3, height = 0, width = 0;
  images::Transforms transforms;
  std::uint64_t seed = 0;
};

// The one float image input of `graph` (its field and [C, H, W]); throws
// DataError naming the model when it has none or several.
ImageOptions image_input(const graph::OpGraph& graph);

// The default transforms for an input of height x width (docs/data.md):
// training random_resized_crop + horizontal_flip + normalize, evaluation
// resize (to size / 0.875) + center_crop + normalize; imagenet's mean and
// std for 3 channels, 0.5 and 0.5 for 1.
nlohmann::json default_transforms(int channels, int height, int width, bool training);

// An image folder or tar shards ("images" or "tar") through its cached
// index (formats::load_index); `label` and the image field.
std::shared_ptr<const Source> open_images(const std::string& kind, const std::string& path, ImageOptions options,
                                          const std::string& cache_dir);
std::shared_ptr<const Source> image_source(formats::SampleIndex index, ImageOptions options);

// A token file (formats/token_files.h; Note [Token streams]) for `graph`
// (its ids field and positions T): fields ids and label, int64 [T] each.
// Every id is checked below the ids input's range when opened; throws
// DataError naming the file and the first id outside it.
std::shared_ptr<const Source> open_token_file(const graph::OpGraph& graph, const std::string& path);

// DIR/FIELD.npy for each of `fields`, mapped into memory, not read: a
// batch touches only its rows' pages. The same checks as load_npy.
Splits map_npy(const std::string& train_dir, const std::string& test_dir, const std::set<std::string>& fields);

}  // namespace trident::data
