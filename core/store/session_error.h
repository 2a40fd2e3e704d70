// The error every reader and writer of a session throws: the file it concerns and the problem,
// printed as one line (the CLI's "fragscope CMD: FILE: problem").
#pragma once

#include <stdexcept>
#include <string>

namespace fs {

// Error with the file it concerns; what() is "FILE: problem", one line, as the CLI prints it.
class SessionError : public std::runtime_error
{
public:
    SessionError(const std::string& path, const std::string& problem)
        : std::runtime_error(path + ": " + oneLine(problem)), path_(path),
          problem_(oneLine(problem))
    {
    }
    // Messages are printed as one line; multi-line diagnostics (quick_check) are joined.
    static std::string oneLine(std::string s)
    {
        for (char& c : s)
            if (c == '\n' || c == '\r') c = ' ';
        return s;
    }
    const std::string& path() const { return path_; }
    const std::string& problem() const { return problem_; }

private:
    std::string path_;
    std::string problem_;
};

} // namespace fs
