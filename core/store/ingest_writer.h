// Ingest's writer thread state (IngestOptions::writerThread), shared by ingest.cpp and
// ingest_writer.cpp. Not a public interface.
#pragma once

#include "batch_worker.h"
#include "ingest.h"

#include <vector>

namespace fs {

struct Ingest::Writer
{
    explicit Writer(std::function<void(std::vector<Pending>&)> run)
        : worker(
              std::move(run), [](std::vector<Pending>& b) { b.clear(); }, kMaxQueued)
    {
    }
    static constexpr size_t kBatchEvents = 4096; // events handed over at once
    static constexpr size_t kMaxQueued = 8;      // batches waiting: bounds the memory (~3.5 MiB)
    store::BatchWorker<std::vector<Pending>> worker;
    std::vector<Pending> batch; // being filled by add(), on the caller's thread
};

} // namespace fs
