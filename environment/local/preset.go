package local

import (
	"path"
	"slices"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
)

// The local backend runs the host's programs. The office image
// (images/Dockerfile.office) sets LibreOffice up for a sandbox in its
// shared configuration layer (/etc/libreoffice/registry/agentbox.xcd):
// no first start's dialogs and bars (tip of the day, what's new, get
// involved, donate), no document recovery. This backend gives it the same
// settings inside the sandbox only — never in the host user's files or
// the host's /etc — as the user profile's registrymodifications.xcu,
// written into the sandbox's fresh home before a LibreOffice launcher
// starts (TestLibreOfficePresetMatchesImage keeps the two alike).
//
// (The image's other setting, Chromium's flags in /etc/chromium.d, has no
// such place: Debian's launcher clears CHROMIUM_FLAGS and reads only
// /etc/chromium.d, which the sandbox shows read-only from the host. On
// this backend a task gives Chromium --no-sandbox in its arguments.)

// libreOfficeProfile is the user profile's settings file, below the home.
const libreOfficeProfile = ".config/libreoffice/4/user/registrymodifications.xcu"

// libreOfficeLaunchers are the commands (by base name) that start
// LibreOffice.
var libreOfficeLaunchers = []string{"soffice", "libreoffice", "localc", "lowriter", "loimpress", "lodraw", "lomath", "lobase", "loweb"}

// libreOfficePreset is the settings of images/Dockerfile.office's
// agentbox.xcd, as a user profile's items.
const libreOfficePreset = `<?xml version="1.0" encoding="UTF-8"?>
<!-- agentbox: defaults for a clean first start (the local backend; images/Dockerfile.office has the same) -->
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" oor:op="fuse"><value>99.0</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="LastTimeGetInvolvedShown" oor:op="fuse"><value>4102444800</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="LastTimeDonateShown" oor:op="fuse"><value>4102444800</value></prop></item>
<item oor:path="/org.openoffice.Office.Recovery/RecoveryInfo"><prop oor:name="Enabled" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
`

// preset is the local backend's guestenv.Options.Preset.
func preset(spec environment.LaunchSpec) guestenv.Preset {
	var p guestenv.Preset
	if spec.App != nil && slices.Contains(libreOfficeLaunchers, path.Base(spec.App.Manifest.Command)) {
		p.Files = append(p.Files, guestenv.PresetFile{Path: libreOfficeProfile, Data: []byte(libreOfficePreset)})
	}
	return p
}
