#include "trident/formats/sample_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trident/base/files.h"
#include "trident/base/hash.h"
#include "trident/formats/tar.h"

namespace trident::formats {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "trident-sample-index 1";

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool image_extension(const std::string& ext) {
  const auto e = lower(ext);
  return e == ".jpg" || e == ".jpeg" || e == ".png";
}

Stamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {path, -1, 0};
  return {path, static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<std::uint64_t>(st.st_size)};
}

// The integer label of a .cls or .json member's text; `where` names it.
std::int64_t parse_label(const std::string& ext, const std::string& text, const std::string& where) {
  try {
    if (ext == "cls") {
      std::size_t used = 0;
      const auto v = std::stoll(text, &used);
      if (text.find_first_not_of(" \t\r\n", used) == std::string::npos) return v;
    } else {
      const auto j = nlohmann::json::parse(text);
      if (j.is_number_integer()) return j.get<std::int64_t>();
      if (j.is_object() && j.contains("label") && j["label"].is_number_integer()) return j["label"].get<std::int64_t>();
    }
  } catch (const std::exception&) {
  }
  throw DataError(where + ": the label is not an integer" +
                  (ext == "cls" ? std::string(" (a .cls member holds one, as text)")
                                : std::string(" (a .json member holds one, or an object with an integer \"label\")")));
}

}  // namespace

std::int64_t SampleIndex::num_classes() const {
  if (!classes.empty()) return static_cast<std::int64_t>(classes.size());
  std::int64_t most = -1;
  for (const auto& s : samples) most = std::max(most, s.label);
  return most + 1;
}

std::uint64_t SampleIndex::bytes() const {
  std::uint64_t total = 0;
  for (const auto& s : samples) total += s.size;
  return total;
}

SampleIndex scan_image_folder(const std::string& root_path) {
  std::error_code ec;
  const auto root = fs::absolute(root_path, ec).lexically_normal().string();
  if (!fs::is_directory(root, ec)) throw DataError(root_path + ": no such directory (an image folder is ROOT/<class>/<image>)");
  SampleIndex index;
  index.kind = "images", index.root = root;
  index.stamps.push_back(stamp_of(root));
  for (const auto& entry : fs::directory_iterator(root, fs::directory_options::follow_directory_symlink, ec))
    if (entry.is_directory()) index.classes.push_back(entry.path().filename().string());
  if (ec) throw DataError(root_path + ": cannot be listed (" + ec.message() + ")");
  std::sort(index.classes.begin(), index.classes.end());
  if (index.classes.empty())
    throw DataError(root_path + ": holds no class folder; an image folder is ROOT/<class>/<image> (torchvision's "
                    "ImageFolder layout)");
  for (std::size_t c = 0; c < index.classes.size(); ++c) {
    const auto dir = root + "/" + index.classes[c];
    std::vector<std::pair<std::string, std::uint64_t>> images;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory()) {
        index.stamps.push_back(stamp_of(it->path().string()));
        continue;
      }
      if (!it->is_regular_file()) continue;
      if (!image_extension(it->path().extension().string())) {
        ++index.skipped;
        continue;
      }
      images.emplace_back(it->path().string(), it->file_size());
    }
    if (ec) throw DataError(dir + ": cannot be listed (" + ec.message() + ")");
    if (images.empty())
      throw DataError(dir + ": class folder '" + index.classes[c] + "' holds no image (.jpg, .jpeg, .png); remove "
                      "it or add its images");
    index.stamps.push_back(stamp_of(dir));
    std::sort(images.begin(), images.end());
    for (const auto& [path, size] : images) {
      index.samples.push_back({static_cast<std::uint32_t>(index.files.size()), 0, size, static_cast<std::int64_t>(c)});
      index.files.push_back(path);
    }
  }
  return index;
}

std::vector<std::string> expand_braces(const std::string& pattern) {
  const auto open = pattern.find('{');
  if (open == std::string::npos) return {pattern};
  const auto close = pattern.find('}', open);
  const auto dots = pattern.find("..", open);
  if (close == std::string::npos || dots == std::string::npos || dots > close)
    throw DataError(pattern + ": a brace range is {FIRST..LAST}, e.g. shard-{000000..000099}.tar");
  const auto first = pattern.substr(open + 1, dots - open - 1), last = pattern.substr(dots + 2, close - dots - 2);
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(first) || !digits(last))
    throw DataError(pattern + ": the range {" + first + ".." + last + "} must be of decimal numbers");
  const long a = std::stol(first), b = std::stol(last);
  if (b < a) throw DataError(pattern + ": the range {" + first + ".." + last + "} runs backwards");
  if (b - a >= 10000000) throw DataError(pattern + ": the range names more than 10^7 shards");
  std::vector<std::string> names;
  for (long i = a; i <= b; ++i) {
    auto n = std::to_string(i);
    if (n.size() < first.size()) n.insert(0, first.size() - n.size(), '0');
    for (auto& rest : expand_braces(pattern.substr(close + 1))) names.push_back(pattern.substr(0, open) + n + rest);
  }
  return names;
}

SampleIndex scan_tar_shards(const std::string& pattern) {
  SampleIndex index;
  index.kind = "tar", index.root = pattern;
  for (const auto& name : expand_braces(pattern)) {
    std::error_code ec;
    const auto path = fs::absolute(name, ec).lexically_normal().string();
    std::ifstream in(path, std::ios::binary);
    const auto size = fs::file_size(path, ec);
    if (!in || ec) throw DataError(name + ": no such shard (data pattern " + pattern + ")");
    const auto read = [&](std::uint64_t at, std::uint64_t len) {
      std::string b(len, '\0');
      in.seekg(static_cast<std::streamoff>(at));
      in.read(b.data(), static_cast<std::streamsize>(len));
      if (static_cast<std::uint64_t>(in.gcount()) != len) throw DataError(path + ": read failed at byte " + std::to_string(at));
      return b;
    };
    const auto members = index_tar(read, size, path);
    const auto file = static_cast<std::uint32_t>(index.files.size());
    index.files.push_back(path);
    index.stamps.push_back(stamp_of(path));
    // Members of one key are adjacent in WebDataset's shards; a key seen
    // again later is a new sample only if its first one is complete.
    struct Pending { std::string key; const TarMember* image = nullptr; std::optional<std::int64_t> label; };
    Pending cur;
    auto flush = [&] {
      if (cur.key.empty()) return;
      if (!cur.image || !cur.label)
        throw DataError(path + ": sample '" + cur.key + "' has " + (cur.image ? "an image but no label (.cls or .json)"
                                                                               : "a label but no image (.jpg, .jpeg, .png)"));
      if (*cur.label < 0)
        throw DataError(path + ": sample '" + cur.key + "' has label " + std::to_string(*cur.label) +
                        "; class ids are 0 or more");
      index.samples.push_back({file, cur.image->offset, cur.image->size, *cur.label});
      cur = {};
    };
    for (const auto& m : members) {
      const auto slash = m.name.rfind('/');
      const auto dot = m.name.find('.', slash == std::string::npos ? 0 : slash + 1);
      const auto key = m.name.substr(0, dot);
      const auto ext = dot == std::string::npos ? std::string() : lower(m.name.substr(dot + 1));
      const bool image = ext == "jpg" || ext == "jpeg" || ext == "png";
      const bool label = ext == "cls" || ext == "json";
      if (!image && !label) {
        ++index.skipped;
        continue;
      }
      if (key != cur.key) flush(), cur.key = key;
      if (image) {
        cur.image = &m;
      } else {
        if (m.size > 4096) throw DataError(path + ": the label member '" + m.name + "' is " + std::to_string(m.size) + " bytes; at most 4096");
        cur.label = parse_label(ext, read(m.offset, m.size), path + ": member '" + m.name + "'");
      }
    }
    flush();
  }
  if (index.samples.empty()) throw DataError(pattern + ": the shards hold no sample (an image beside a .cls or .json)");
  return index;
}

std::string write_index(const SampleIndex& x) {
  std::ostringstream o;
  o << kFormat << "\n" << x.kind << "\n" << x.root << "\n" << x.skipped << "\n";
  o << x.stamps.size() << "\n";
  for (const auto& s : x.stamps) o << s.mtime_ns << " " << s.size << " " << s.path << "\n";
  o << x.classes.size() << "\n";
  for (const auto& c : x.classes) o << c << "\n";
  o << x.files.size() << "\n";
  for (const auto& f : x.files) o << f << "\n";
  o << x.samples.size() << "\n";
  for (const auto& s : x.samples) o << s.file << " " << s.offset << " " << s.size << " " << s.label << "\n";
  o << "end\n";
  return o.str();
}

SampleIndex parse_index(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  std::size_t line_no = 0;
  auto bad = [&](const std::string& what) {
    return DataError(origin + ": line " + std::to_string(line_no) + ": " + what + " (a stale or damaged index; "
                     "delete it to rebuild)");
  };
  auto line = [&] {
    std::string l;
    if (!std::getline(in, l)) throw bad("ends early");
    ++line_no;
    return l;
  };
  auto count = [&](std::uint64_t most) {
    const auto l = line();
    if (l.empty() || l.size() > 12 || l.find_first_not_of("0123456789") != std::string::npos) throw bad("not a count: '" + l.substr(0, 40) + "'");
    const auto n = std::stoull(l);
    if (n > most) throw bad("count " + l + " is more than " + std::to_string(most));
    return n;
  };
  if (line() != kFormat) throw bad(std::string("not a ") + kFormat + " file");
  SampleIndex x;
  x.kind = line();
  if (x.kind != "images" && x.kind != "tar") throw bad("kind '" + x.kind.substr(0, 40) + "' is neither images nor tar");
  x.root = line();
  x.skipped = count(~std::uint64_t{0} >> 1);
  const std::uint64_t kMost = text.size();  // each entry takes a line
  for (auto n = count(kMost); n > 0; --n) {
    Stamp s;
    std::istringstream l(line());
    l >> s.mtime_ns >> s.size;
    if (!l || l.get() != ' ') throw bad("a stamp is 'MTIME_NS SIZE PATH'");
    std::getline(l, s.path);
    x.stamps.push_back(s);
  }
  for (auto n = count(kMost); n > 0; --n) x.classes.push_back(line());
  for (auto n = count(kMost); n > 0; --n) x.files.push_back(line());
  for (auto n = count(kMost); n > 0; --n) {
    SampleRef s;
    std::istringstream l(line());
    std::string rest;
    if (!(l >> s.file >> s.offset >> s.size >> s.label) || (l >> rest)) throw bad("a sample is 'FILE OFFSET SIZE LABEL'");
    if (s.file >= x.files.size()) throw bad("sample names file " + std::to_string(s.file) + " of " + std::to_string(x.files.size()));
    if (s.label < 0 || (!x.classes.empty() && s.label >= static_cast<std::int64_t>(x.classes.size())))
      throw bad("label " + std::to_string(s.label) + " is outside the classes");
    x.samples.push_back(s);
  }
  if (line() != "end") throw bad("no end line");
  return x;
}

std::uint64_t index_identity(const SampleIndex& index) {
  return fnv1a(write_index(index));
}

bool index_current(const SampleIndex& index) {
  for (const auto& s : index.stamps)
    if (!(stamp_of(s.path) == s)) return false;
  return true;
}

SampleIndex load_index(const std::string& kind, const std::string& path, const std::string& cache_dir,
                       bool* rescanned) {
  std::error_code ec;
  const auto key = kind == "images" ? fs::absolute(path, ec).lexically_normal().string() : path;
  const std::uint64_t h = fnv1a(kind + "\n" + key);
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.txt", static_cast<unsigned long long>(h));
  const auto file = cache_dir + "/index/" + name;
  if (rescanned) *rescanned = false;
  if (std::ifstream in{file, std::ios::binary}) {
    try {
      auto index = parse_index({std::istreambuf_iterator<char>(in), {}}, file);
      if (index.kind == kind && index.root == (kind == "images" ? key : path) && index_current(index)) return index;
    } catch (const DataError&) {  // a damaged cache is rebuilt
    }
  }
  if (rescanned) *rescanned = true;
  auto index = kind == "images" ? scan_image_folder(path) : scan_tar_shards(path);
  try {
    fs::create_directories(cache_dir + "/index");
    write_file_atomic(file, write_index(index));
  } catch (const std::exception&) {  // a read-only cache costs only the scan
  }
  return index;
}

}  // namespace trident::formats
