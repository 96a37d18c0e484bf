// The readers of streamed datasets: tar headers, Megatron indexes, image
// folders and shards scanned into sample indexes, and the index cache.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "trident/formats/sample_index.h"
#include "trident/formats/tar.h"
#include "trident/formats/token_files.h"

namespace trident::formats {
namespace {
namespace fs = std::filesystem;

// A ustar member: header (name, octal size, checksum) and padded data.
std::string member(const std::string& name, const std::string& data, char type = '0') {
  std::string h(512, '\0');
  std::memcpy(h.data(), name.data(), std::min<std::size_t>(name.size(), 100));
  std::snprintf(h.data() + 100, 8, "%07o", 0644);
  std::snprintf(h.data() + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
  std::snprintf(h.data() + 136, 12, "%011o", 0);
  h[156] = type;
  std::memcpy(h.data() + 257, "ustar\0" "00", 8);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h.data() + 148, 8, "%06o", sum);
  return h + data + std::string((512 - data.size() % 512) % 512, '\0');
}

std::string pax(const std::string& path) {
  auto record = " path=" + path + "\n";
  auto len = record.size() + 2;
  if (std::to_string(len).size() != 2) len = record.size() + std::to_string(record.size() + 3).size();
  return member("PaxHeader", std::to_string(len) + record, 'x');
}

const std::string kEnd(1024, '\0');

TEST(Tar, MembersAtTheirOffsetsWithLongNames) {
  const std::string long_name(150, 'n');
  const auto tar = member("a.jpg", "JPEGDATA") + member("dir/", "", '5') + pax(long_name + ".cls") + member("short", "7") +
                   kEnd;
  const auto m = index_tar_bytes(tar, "t.tar");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].name, "a.jpg");
  EXPECT_EQ(tar.substr(m[0].offset, m[0].size), "JPEGDATA");
  EXPECT_EQ(m[1].name, long_name + ".cls");
  EXPECT_EQ(tar.substr(m[1].offset, m[1].size), "7");
}

TEST(Tar, DamageIsADataErrorNamingTheArchive) {
  const auto good = member("a.jpg", std::string(2000, 'x')) + kEnd;
  auto bad_sum = good;
  bad_sum[10] = 'z';
  for (const auto& [bytes, expected] : std::vector<std::pair<std::string, std::string>>{
           {good.substr(0, 1200), "truncated"},
           {good.substr(0, 300), "truncated"},
           {"", "empty"},
           {bad_sum, "checksum"},
           {std::string(600, 'q'), "checksum"}}) {
    try {
      index_tar_bytes(bytes, "s-000.tar");
      ADD_FAILURE() << expected << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("s-000.tar"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

// A Megatron .idx for sequences of `sizes` ids of `code`'s dtype.
std::string megatron_idx(const std::vector<std::int32_t>& sizes, std::uint8_t code, int item) {
  std::string b("MMIDIDX\0\0", 9);
  auto put = [&](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(std::uint64_t{1});
  put(code);
  put(static_cast<std::uint64_t>(sizes.size()));
  put(static_cast<std::uint64_t>(sizes.size() + 1));
  for (auto s : sizes) put(s);
  std::int64_t at = 0;
  for (auto s : sizes) put(at), at += std::int64_t{s} * item;
  for (std::size_t d = 0; d <= sizes.size(); ++d) put(static_cast<std::int64_t>(d));
  return b;
}

TEST(TokenFiles, AMegatronIndexAgreesWithItsBinOrNamesWhy) {
  const auto f = parse_megatron_idx(megatron_idx({5, 3, 9}, 8, 2), 34, "c.idx");
  EXPECT_EQ(f.tokens, 17u);
  EXPECT_EQ(f.item_bytes, 2);
  EXPECT_EQ(f.documents, 3u);
  EXPECT_EQ(parse_megatron_idx(megatron_idx({4}, 4, 4), 16, "c.idx").item_bytes, 4);
  auto expect_error = [](const std::string& bytes, std::uint64_t bin, const std::string& expected) {
    try {
      parse_megatron_idx(bytes, bin, "c.idx");
      ADD_FAILURE() << expected << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  expect_error(megatron_idx({5, 3, 9}, 8, 2), 36, "disagrees with its .bin");
  expect_error(megatron_idx({5}, 6, 8), 40, "not an integer type");
  expect_error("MMIDIDX", 0, "not a Megatron index");
  auto shifted = megatron_idx({5, 3}, 8, 2);
  shifted[34 + 8 + 8] = 1;  // the second pointer no longer follows the first sequence
  expect_error(shifted, 16, "disagrees with itself");
  expect_error(megatron_idx({5, 3}, 8, 2).substr(0, 40), 16, "holds");
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("trident-streams-" + std::to_string(::getpid()) + "-" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(path), fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& rel, const std::string& bytes) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel, std::ios::binary) << bytes;
  }
};

TEST(ImageFolder, ClassesAreSortedFoldersAndOtherFilesAreSkipped) {
  TempDir d;
  d.write("dog/b.JPG", "bb"), d.write("dog/a.png", "a"), d.write("cat/x/deep.jpeg", "deep"), d.write("cat/notes.txt", "t");
  const auto index = scan_image_folder(d.path.string());
  EXPECT_EQ(index.classes, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(index.samples.size(), 3u);
  EXPECT_EQ(index.samples[0].label, 0);
  EXPECT_EQ(fs::path(index.files[index.samples[1].file]).filename(), "a.png");
  EXPECT_EQ(index.samples[2].size, 2u);
  EXPECT_EQ(index.skipped, 1u);
  EXPECT_EQ(index.num_classes(), 2);
}

TEST(ImageFolder, AnEmptyClassOrNoClassIsADataErrorNamingIt) {
  TempDir d;
  d.write("dog/a.png", "a");
  fs::create_directories(d.path / "cat");
  try {
    scan_image_folder(d.path.string());
    ADD_FAILURE() << "empty class accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("class folder 'cat' holds no image"), std::string::npos) << e.what();
  }
  TempDir flat;
  flat.write("a.png", "a");
  EXPECT_THROW(scan_image_folder(flat.path.string()), DataError);
  EXPECT_THROW(scan_image_folder((flat.path / "missing").string()), DataError);
}

TEST(TarShards, MembersOfOneKeyFormASampleAndLabelsAreChecked) {
  TempDir d;
  d.write("s-0.tar", member("k1.jpg", "IMG1") + member("k1.cls", "3\n") + member("k2.cls", "1") + member("k2.png", "IMG2") +
                         member("k2.txt", "caption") + kEnd);
  d.write("s-1.tar", member("k3.json", R"({"label": 2})") + member("k3.jpg", "IMG3") + kEnd);
  const auto index = scan_tar_shards((d.path / "s-{0..1}.tar").string());
  ASSERT_EQ(index.samples.size(), 3u);
  EXPECT_EQ(index.samples[0].label, 3);
  EXPECT_EQ(index.samples[1].label, 1);
  EXPECT_EQ(index.samples[2].file, 1u);
  EXPECT_EQ(index.num_classes(), 4);
  EXPECT_EQ(index.skipped, 1u);
  std::ifstream in(index.files[1], std::ios::binary);
  std::string image(4, '\0');
  in.seekg(static_cast<std::streamoff>(index.samples[2].offset)).read(image.data(), 4);
  EXPECT_EQ(image, "IMG3");
  for (const auto& [tar, expected] : std::vector<std::pair<std::string, std::string>>{
           {member("k.jpg", "I") + kEnd, "'k' has an image but no label"},
           {member("k.cls", "1") + kEnd, "a label but no image"},
           {member("k.jpg", "I") + member("k.cls", "-1") + kEnd, "label -1"},
           {member("k.jpg", "I") + member("k.cls", "one") + kEnd, "not an integer"},
           {"", "empty"}}) {
    d.write("bad.tar", tar);
    try {
      scan_tar_shards((d.path / "bad.tar").string());
      ADD_FAILURE() << expected << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.tar"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(TarShards, BraceRangesExpandAsWritten) {
  EXPECT_EQ(expand_braces("a-{008..011}.tar"),
            (std::vector<std::string>{"a-008.tar", "a-009.tar", "a-010.tar", "a-011.tar"}));
  EXPECT_EQ(expand_braces("plain.tar"), std::vector<std::string>{"plain.tar"});
  EXPECT_THROW(expand_braces("a-{5..1}.tar"), DataError);
  EXPECT_THROW(expand_braces("a-{x..1}.tar"), DataError);
  EXPECT_THROW(expand_braces("a-{1..2.tar"), DataError);
}

TEST(SampleIndexCache, ReadBackWhileCurrentAndRebuiltWhenTheFolderChanges) {
  TempDir d, cache;
  d.write("data/a/1.png", "x"), d.write("data/b/2.png", "yy");
  bool rescanned = false;
  const auto first = load_index("images", (d.path / "data").string(), cache.path.string(), &rescanned);
  EXPECT_TRUE(rescanned);
  const auto again = load_index("images", (d.path / "data").string(), cache.path.string(), &rescanned);
  EXPECT_FALSE(rescanned);
  EXPECT_EQ(index_identity(first), index_identity(again));
  EXPECT_EQ(write_index(parse_index(write_index(first), "x")), write_index(first));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later mtime for the folder
  d.write("data/b/3.png", "zzz");
  const auto grown = load_index("images", (d.path / "data").string(), cache.path.string(), &rescanned);
  EXPECT_TRUE(rescanned);
  EXPECT_EQ(grown.samples.size(), 3u);
  EXPECT_NE(index_identity(grown), index_identity(first));
  // A damaged cache is rebuilt, never trusted.
  for (const auto& f : fs::directory_iterator(cache.path / "index")) std::ofstream(f.path()) << "garbage";
  EXPECT_EQ(load_index("images", (d.path / "data").string(), cache.path.string(), &rescanned).samples.size(), 3u);
  EXPECT_TRUE(rescanned);
}

TEST(SampleIndexCache, MalformedTextIsADataError) {
  TempDir d;
  d.write("a/1.png", "x");
  const auto text = write_index(scan_image_folder(d.path.string()));
  for (const auto& broken : {text.substr(0, text.size() / 2), std::string("nonsense\n"),
                             text.substr(0, text.rfind("0 0 1 0")) + "5 0 1 0\nend\n"}) {
    EXPECT_THROW(parse_index(broken, "cache.txt"), DataError) << broken;
  }
}

}  // namespace
}  // namespace trident::formats
