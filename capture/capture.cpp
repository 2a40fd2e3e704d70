// Anchor translation unit of fragscope_capture (the library may otherwise be empty early on).
namespace fs::capture {
int libraryAnchor()
{
    return 0;
}
} // namespace fs::capture
