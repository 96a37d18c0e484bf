// How fast this machine turns JPEGs into training inputs (`trident
// calibrate` measures it; `trident plan` says how many decoding threads a
// plan's predicted samples/s would take).
#pragma once

#include <optional>
#include <string>

namespace trident::images {

// Images per second on one thread through the default training transforms
// (random_resized_crop 224, flip, normalize) from photo-sized JPEGs (500x375,
// quality 90, drawn in memory), over `images` decodes after a warm-up.
double measure_loader_rate(int images = 200);

// Where `trident calibrate` keeps it: <cache dir>/loader-<hostname>.json.
std::string loader_rate_path();
void write_loader_rate(double images_per_s);
// The rate written here, if any (a missing or unreadable file: none).
std::optional<double> read_loader_rate();

}  // namespace trident::images
