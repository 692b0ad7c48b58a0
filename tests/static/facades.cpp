// Compile-time checks of the two facades (built as part of `all`, without the tests' precompiled
// header): the engine include alone names the engine's interface and runs the step decoder on the
// `SequenceModel` archetypes; the research include adds the single-request entry points.
#include <specdec/engine.hpp>

#include <type_traits>

static_assert(specdec::SequenceModel<specdec::sequence_model_archetype>);
static_assert(specdec::TreeSequenceModel<specdec::tree_sequence_model_archetype>);
using engine_decoder = decltype(specdec::batch_decoder(specdec::exec::seq, std::declval<specdec::sequence_model_archetype&>(),
                                                       std::declval<specdec::no_sequence_model&>(), specdec::strict));
static_assert(
    std::is_same_v<engine_decoder, specdec::batch_decoder<specdec::exec::sequenced_policy, specdec::sequence_model_archetype,
                                                          specdec::no_sequence_model>>);
static_assert(std::is_constructible_v<specdec::request_acceptance, specdec::tree_acceptance>);
static_assert(std::is_class_v<specdec::simulated_clock> && std::is_class_v<specdec::step_event>);

#include <specdec/research.hpp>

static_assert(
    std::is_same_v<decltype(specdec::decode_target_only(specdec::exec::seq, std::declval<const specdec::model_archetype&>(),
                                                        std::span<const specdec::token_id>{}, specdec::decode_options{})),
                   specdec::decode_result>);
