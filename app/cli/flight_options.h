// `record`/`attach --keep DURATION [--before D] [--after D] [--max-size BYTES]`: the flight
// recorder's options (capture/recorder/flight_recorder.h, docs/capture.md "Flight recording").
#pragma once

#include "capture/recorder/recorder.h"
#include "command.h"

#include <optional>
#include <vector>

namespace fs::cli {

std::vector<Option> withFlightOptions(std::vector<Option> own);
// None without --keep (the whole run is recorded); a usage error for bad values. The collapse
// triggers test the user's collapse rules (settings file).
std::optional<capture::FlightOptions> flightOptions(const Args& a);
// One line per window written, and the triggers that found the file full.
void printWindows(const char* command, const capture::RecordResult& r);

} // namespace fs::cli
