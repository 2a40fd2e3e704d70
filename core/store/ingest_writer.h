// Ingest's writer thread state (IngestOptions::writerThread), shared by ingest.cpp and
// ingest_writer.cpp. Not a public interface.
#pragma once

#include "ingest.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fs {

struct Ingest::Writer
{
    std::thread thread;
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::vector<Pending>> queue;
    std::vector<Pending> batch; // being filled by add(), on the caller's thread
    bool busy = false;          // the thread is processing a batch it took off the queue
    bool stop = false;
    std::exception_ptr error;
};

} // namespace fs
