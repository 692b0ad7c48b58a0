// COMPILE_FAIL_EXPECTS: cannot verify what the drafter stage writes
// A drafter stage's output is part of its type (draft_stage_of): pairing a tree drafter with a chain
// rule through request_options::set_stages does not compile (set field by field, add() refuses it).
#include <span>

#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/draft/suffix_drafter.hpp"

void pair(specdec::request_options& o) {
#ifdef SPECDEC_COMPILE_FAIL_CONTROL
  o.set_stages(specdec::suffix_tree_stage({}), specdec::tree_acceptance{specdec::target_only});
#else
  o.set_stages(specdec::suffix_tree_stage({}), specdec::strict);
#endif
}

int main() {}
