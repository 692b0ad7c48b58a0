//! \file random/stream.hpp
//! \brief Random streams addressed by (seed, request, step, position, purpose).
//!
//! Key = the 64-bit seed. Counter = {position, purpose << 24 | block, step, request}: every draw
//! has an address that says what it is for, so a request's randomness never depends on the
//! other requests of its batch, on the backend, or on how many draws other purposes used.
#pragma once

#include <array>
#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/random/philox.hpp"
#include "specdec/random/uniform.hpp"

namespace specdec::random {

//! What a draw is for. Each purpose has its own stream, so adding draws for one purpose never
//! shifts another's. Values up to 255; `user` and above are free for callers.
enum class purpose : std::uint8_t {
  accept = 0,         //!< the uniform of an accept/reject test
  resample = 1,       //!< the residual or bonus token (one code path)
  draft = 2,          //!< sampling a draft token
  target_sample = 3,  //!< the target's own sample (sample-and-match, target-only decoding)
  verifier = 4,       //!< SPRINTER's noisy-oracle verifier
  beam = 5,           //!< beam sampling (MTAD)
  simulate = 6,       //!< Monte-Carlo simulators
  user = 128,         //!< first value free for callers
};

//! The address of a stream: which seed, which request, which step and position, what purpose.
struct stream_address {
  std::uint64_t seed = 0;          //!< the seed (the Philox key)
  std::uint32_t request = 0;       //!< the request's stable id (not its index in the batch)
  std::uint32_t step = 0;          //!< the decode step
  std::uint32_t position = 0;      //!< the position within the step (e.g. the draft index)
  purpose what = purpose::accept;  //!< what the draws are for
};

//! The Philox counter and key of block `block` of a stream. Blocks are 24-bit: 2^24 blocks of
//! four 32-bit words per stream.
SPECDEC_HOST_DEVICE constexpr std::array<std::uint32_t, 4> stream_counter(const stream_address& a, std::uint32_t block) noexcept {
  return {a.position, (static_cast<std::uint32_t>(a.what) << 24) | (block & 0x00FFFFFFu), a.step, a.request};
}
//! The Philox key of a stream: the two 32-bit halves of its seed.
SPECDEC_HOST_DEVICE constexpr std::array<std::uint32_t, 2> stream_key(const stream_address& a) noexcept {
  return {static_cast<std::uint32_t>(a.seed), static_cast<std::uint32_t>(a.seed >> 32)};
}

//! The `index`-th uniform double of a stream, computed directly from its address (two words per
//! double, so block index / 2). Lets parallel kernels draw element i without a running state.
SPECDEC_HOST_DEVICE constexpr double uniform_at(const stream_address& a, std::uint32_t index) noexcept {
  const auto words = philox4x32_10(stream_counter(a, index / 2), stream_key(a));
  return (index % 2 == 0) ? uniform_double(words[0], words[1]) : uniform_double(words[2], words[3]);
}

//! A sequential reader of one stream: 32-bit words, uniforms, exponential and Gumbel variates.
//! Cheap to copy; a copy replays the same draws.
class philox_stream {
 public:
  //! The stream at `address`, from its first word.
  SPECDEC_HOST_DEVICE constexpr explicit philox_stream(const stream_address& address) noexcept : address_(address) {}

  //! The next random 32-bit word.
  SPECDEC_HOST_DEVICE constexpr std::uint32_t next_u32() noexcept {
    if (used_ == 4) {
      buffer_ = philox4x32_10(stream_counter(address_, block_), stream_key(address_));
      ++block_;
      used_ = 0;
    }
    return buffer_[used_++];
  }
  //! A double in [0, 1) with 53 bits (two words).
  SPECDEC_HOST_DEVICE constexpr double uniform() noexcept {
    const std::uint32_t hi = next_u32();
    return uniform_double(hi, next_u32());
  }
  //! A float in [0, 1) with 24 bits (one word).
  SPECDEC_HOST_DEVICE constexpr float uniform_f() noexcept { return uniform_float(next_u32()); }
  //! An Exp(1) variate.
  SPECDEC_HOST_DEVICE double exponential() noexcept { return exponential_from_uniform(uniform()); }
  //! A standard Gumbel variate, finite (u is redrawn while 0).
  SPECDEC_HOST_DEVICE double gumbel() noexcept {
    double u = uniform();
    while (u == 0.0) u = uniform();
    return gumbel_from_uniform(u);
  }
  //! The stream's address.
  SPECDEC_HOST_DEVICE constexpr const stream_address& address() const noexcept { return address_; }

 private:
  stream_address address_;
  std::array<std::uint32_t, 4> buffer_{};
  std::uint32_t block_ = 0;
  std::uint32_t used_ = 4;
};

//! `request_stream::output_position` when the target's own samples are keyed by the round.
inline constexpr std::uint32_t keyed_by_round = 0xFFFFFFFFu;

//! A request's identity for randomness: its seed, a stable id (not its index in the batch) and
//! the decode step. Positions and purposes are filled in by the algorithm.
//!
//! Output-position keying (docs/reference/sampling-contract.md, "Target samples"): when
//! `output_position` is the index in the request's output of the token that chain position 0 of
//! this round decides, every draw for `purpose::target_sample` at chain position i is addressed by
//! the output position it decides, {step = output_position + i, position = 0}, whatever the round.
//! Sample-and-match's samples (and so target-only decoding's) then depend on the output position
//! alone, and speculative decoding with any drafter emits, token for token, what target-only
//! decoding emits with the same seed. Only chain walks take such a stream (a chain walk draws the
//! target's sample at position i only when positions < i were accepted, so each output position's
//! uniform decides one token); tree walks take such a stream too and address sample-and-match's sample
//! by the node's depth (one node per depth is visited), every other draw by the node's index.
struct request_stream {
  std::uint64_t seed = 0;                          //!< the seed (the Philox key)
  std::uint32_t request = 0;                       //!< the request's stable id (not its index in the batch)
  std::uint32_t step = 0;                          //!< the decode step
  std::uint32_t output_position = keyed_by_round;  //!< see above; `keyed_by_round`: target samples keyed by `step`

  //! The address of the stream for `position` and `what`.
  SPECDEC_HOST_DEVICE constexpr stream_address at(std::uint32_t position, purpose what) const noexcept {
    if (what == purpose::target_sample && output_position != keyed_by_round)
      return stream_address{seed, request, output_position + position, 0, what};
    return stream_address{seed, request, step, position, what};
  }
  //! A reader of that stream.
  SPECDEC_HOST_DEVICE constexpr philox_stream open(std::uint32_t position, purpose what) const noexcept {
    return philox_stream(at(position, what));
  }
};

}  // namespace specdec::random
