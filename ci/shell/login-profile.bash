# Sourced, never run, by the composite action's steps (action.yml): the environment a reader's login shell
# has, with the job's PATH kept. It reads what `bash -l` reads (/etc/profile, then the first of
# ~/.bash_profile, ~/.bash_login and ~/.profile), so the blocks get what CANN images set there. A
# Debian-family /etc/profile sets PATH afresh, which would drop what the job put on it (setup-python,
# GITHUB_PATH, the image's ENV): every entry of the job's PATH that the profiles left out goes back in
# front, in the job's order; what the profiles added keeps its place after those.
# The caller's shell options (-e, -u) are restored: profiles are not written for them.

guide_guard_job_path=$PATH
guide_guard_options=$-
set +eu
if [ -r /etc/profile ]; then
  # shellcheck source=/dev/null
  . /etc/profile
fi
for guide_guard_profile in "$HOME/.bash_profile" "$HOME/.bash_login" "$HOME/.profile"; do
  if [ -r "$guide_guard_profile" ]; then
    # shellcheck source=/dev/null
    . "$guide_guard_profile"
    break
  fi
done
guide_guard_front=
IFS=: read -r -a guide_guard_entries <<< "$guide_guard_job_path"
for guide_guard_entry in "${guide_guard_entries[@]}"; do
  # an empty entry means the current directory: never put in front
  if [ -n "$guide_guard_entry" ]; then
    case ":$PATH:$guide_guard_front" in
      *":$guide_guard_entry:"*) ;;
      *) guide_guard_front="$guide_guard_front$guide_guard_entry:" ;;
    esac
  fi
done
export PATH="$guide_guard_front$PATH"
case $guide_guard_options in *e*) set -e ;; esac
case $guide_guard_options in *u*) set -u ;; esac
unset guide_guard_job_path guide_guard_options guide_guard_profile guide_guard_front guide_guard_entries guide_guard_entry
