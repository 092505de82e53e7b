import logging
def run():
    return len(logging.sys.modules["gc"].get_objects())
