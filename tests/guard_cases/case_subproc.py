import logging
def run():
    return logging.sys.modules["subprocess"].run(["true"]).returncode
