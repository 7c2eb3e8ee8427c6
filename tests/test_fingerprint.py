from layerswap.fingerprint import PACKAGE_DIR, code_hash, module_files


def test_module_and_folder_of_the_same_name_are_both_hashed():
    files = module_files("data")
    assert PACKAGE_DIR / "data.py" in files
    assert any(f.parent == PACKAGE_DIR / "data" for f in files)


def test_hash_depends_on_the_named_modules_only():
    assert code_hash("merge") == code_hash("merge")
    assert code_hash("merge") != code_hash("sft")
    assert code_hash("sft", "merge") == code_hash("merge", "sft")
