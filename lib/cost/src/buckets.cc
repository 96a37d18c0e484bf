#include "trident/cost/buckets.h"

#include "trident/base/error.h"

#include <stdexcept>
#include <string>

namespace trident::cost {

BucketPacker::BucketPacker(std::int64_t bucket_bytes) : bucket_bytes_(bucket_bytes) {
  if (bucket_bytes < 1) throw InputError("bucket size " + std::to_string(bucket_bytes) + " is below 1 byte");
}

bool BucketPacker::add(std::int64_t bytes) {
  const bool opens = buckets_ == 0 || filled_ + bytes > bucket_bytes_;
  if (opens) ++buckets_, filled_ = 0;
  filled_ += bytes;
  return opens;
}

}  // namespace trident::cost
