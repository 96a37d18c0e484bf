// The image loader's throughput (bench/run_loader.sh): an image folder read
// as training reads it — RandomResizedCrop(224), flip, normalise — in
// batches of `batch`, by `workers` decoding threads with `prefetch` steps
// ahead. Prints one JSON line: time to the first batch, images per second,
// CPU seconds per image, anonymous RSS (peak over the run, and at the first
// batch) and the decode ceiling (whole-image decodes per second on one
// thread, no transforms).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "trident/data/loader.h"
#include "trident/data/sampler.h"
#include "trident/data/streams.h"
#include "trident/images/decode.h"

using namespace trident;

namespace {

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// RssAnon of /proc/self/status, in bytes: the heap, not the page cache.
double anon_rss() {
  std::ifstream in("/proc/self/status");
  std::string key;
  double kb = 0;
  while (in >> key) {
    if (key == "RssAnon:") {
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: bench_loader FOLDER WORKERS BATCHES BATCH [PREFETCH] [CACHE]\n";
    return 2;
  }
  const std::string folder = argv[1];
  const int workers = std::stoi(argv[2]), batches = std::stoi(argv[3]), batch = std::stoi(argv[4]);
  const int prefetch = argc > 5 ? std::stoi(argv[5]) : 2;
  const std::string cache = argc > 6 ? argv[6] : "/tmp/trident-bench-loader-cache";
  torch::set_num_threads(1);
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds();
  data::ImageOptions o;
  o.channels = 3, o.height = o.width = 224, o.seed = 0;
  o.transforms = images::parse_transforms(data::default_transforms(3, 224, 224, true), "data.transforms");
  auto source = data::open_images("images", folder, o, cache);
  data::EpochSampler sampler(source->size(), batch, 0);
  data::Loader loader(source, [&](std::int64_t s) { return sampler.batch_indices(s); },
                      [&](std::int64_t s) { return sampler.epoch_of(s); }, {workers, prefetch, false});
  double first_s = 0, peak_rss = 0, first_rss = 0;
  std::chrono::steady_clock::time_point t1;
  double checksum = 0;
  for (int s = 0; s < batches; ++s) {
    const auto b = loader.rows(s, 0, batch, {"image", "label"});
    checksum += b.at("image")[0][0][0][0].item<float>();
    peak_rss = std::max(peak_rss, anon_rss());
    if (s == 0) {
      t1 = std::chrono::steady_clock::now();
      first_s = std::chrono::duration<double>(t1 - t0).count();
      first_rss = anon_rss();
    }
  }
  const double steady_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const double cpu = cpu_seconds() - cpu0;
  // The decode ceiling: whole images, one thread, no crop or resize.
  const auto index = formats::load_index("images", folder, cache);
  const int probe = std::min<int>(200, static_cast<int>(index.samples.size()));
  std::vector<std::string> files;
  for (int i = 0; i < probe; ++i) {
    std::ifstream in(index.files[index.samples[i].file], std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto d0 = std::chrono::steady_clock::now();
  for (const auto& f : files) images::decode(reinterpret_cast<const std::uint8_t*>(f.data()), f.size(), 3, "probe");
  const double decode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
  nlohmann::json out{{"workers", workers},
                     {"batch", batch},
                     {"batches", batches},
                     {"first_batch_s", first_s},
                     {"images_per_s", (batches - 1) * batch / steady_s},
                     {"cpu_s_per_image", cpu / (batches * batch)},
                     {"anon_rss_first_mb", first_rss / (1 << 20)},
                     {"anon_rss_peak_mb", peak_rss / (1 << 20)},
                     {"decode_ceiling_per_s", probe / decode_s},
                     {"checksum", checksum}};
  std::cout << out.dump() << std::endl;
  return 0;
}
