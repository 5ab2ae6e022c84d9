// The Lua scripts of a Redis pool's keys (task_stream_scripts.cpp, where each one's KEYS,
// ARGV and answer are written beside its text), run by TaskStream (task_stream.cpp).
// Fenced ones open by checking that the entry is still pending for the calling consumer.
#pragma once

#include <sandpool/redis/redis_client.hpp>

namespace sandpool::redis::lua {

extern const Script kSubmit;
extern const Script kClaimSlot;
extern const Script kAttempt;
extern const Script kFinish;
extern const Script kTrim;
extern const Script kBeat;
extern const Script kDiscard;
extern const Script kRelease;
extern const Script kRefused;
extern const Script kCancel;
extern const Script kTouch;
extern const Script kRetry;
extern const Script kMoveDue;
extern const Script kRead;
extern const Script kTake;
extern const Script kClaimIdle;

}  // namespace sandpool::redis::lua
