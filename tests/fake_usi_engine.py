#!/usr/bin/env python3
"""A minimal USI engine for tests: plays its first legal move; misbehaves on request.

FAKE_ENGINE_MODE: "ok" | "exit" (exits after FAKE_ENGINE_MOVES moves) | "hang" (stops answering
after FAKE_ENGINE_MOVES moves) | "illegal" (answers an illegal move).
"""

import os
import sys
import time

import cshogi

mode = os.environ.get("FAKE_ENGINE_MODE", "ok")
limit = int(os.environ.get("FAKE_ENGINE_MOVES", "3"))
board = cshogi.Board()
moves_made = 0
for line in sys.stdin:
    command = line.strip()
    if command == "usi":
        print("id name fake\noption name Threads type spin default 1 min 1 max 4\nusiok", flush=True)
    elif command == "isready":
        print("readyok", flush=True)
    elif command.startswith("position"):
        rest = command[len("position "):]
        head, _, moves = rest.partition(" moves ")
        board = cshogi.Board() if head.strip() == "startpos" else cshogi.Board(head.strip()[5:])
        for m in moves.split():
            board.push_usi(m)
    elif command.startswith("go"):
        moves_made += 1
        if mode == "exit" and moves_made > limit:
            sys.exit(3)
        if mode == "hang" and moves_made > limit:
            time.sleep(3600)
        if mode == "illegal":
            print("bestmove 5e5a", flush=True)
            continue
        legal = list(board.legal_moves)
        print("info depth 1 score cp 0 pv " + (cshogi.move_to_usi(legal[0]) if legal else ""), flush=True)
        print("bestmove " + (cshogi.move_to_usi(legal[0]) if legal else "resign"), flush=True)
    elif command == "quit":
        break
