#include "importer.h"
namespace fs::import {
std::unique_ptr<Importer> makeKinetoImporter(const std::string& path, ImportOptions)
{
    throw ImportError(path, "kineto import not implemented yet");
}
} // namespace fs::import
