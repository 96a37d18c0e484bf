// `trident report RUN_DIR`: the measured pipeline next to the simulator's
// prediction, a timeline SVG, the loss curve and the stage graph.
#pragma once

#include <string>

namespace trident::cli {

// Writes RUN_DIR/{timeline.svg, loss.svg, stages.dot, stages.svg (when
// Graphviz's `dot` is installed), report.html} and prints the summary.
// Throws report::ReportError naming a missing or malformed file.
int run_report(const std::string& run_dir);

}  // namespace trident::cli
